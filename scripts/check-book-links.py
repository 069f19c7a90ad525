#!/usr/bin/env python3
"""Checks the built book (mdBook's HTML under target/book/) for broken links.

Every relative link in every page must name a file that exists in the built
book, and every `#anchor` must name an element id in that page. Links out of
the book (http:, https:, mailto:) are not fetched: CI has no internet. Also
checks that every Markdown file under docs/src/ is a chapter of SUMMARY.md, so
no page is written and then left unreachable.

Usage: scripts/check-book-links.py BOOK_DIR SRC_DIR
Exit status 1 names each broken link as `page: href: why`.
"""
import html.parser
import os
import re
import sys
import urllib.parse

# mdBook's own pages: the print page repeats every chapter with rewritten
# links, the 404 page and the table-of-contents frame link with absolute paths.
SKIP = {"print.html", "404.html", "toc.html"}
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []
        self.in_toc = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def check_links(book):
    problems = []
    pages = 0
    for root, _dirs, files in os.walk(book):
        for name in files:
            if not name.endswith(".html") or name in SKIP:
                continue
            page_path = os.path.join(root, name)
            rel_page = os.path.relpath(page_path, book)
            pages += 1
            for href in parse(page_path).links:
                if not href or EXTERNAL.match(href):
                    continue
                url = urllib.parse.urlsplit(href)
                if url.path.startswith("/"):
                    problems.append(f"{rel_page}: {href}: an absolute path (breaks when the book is served under a prefix)")
                    continue
                target = page_path
                if url.path:
                    target = os.path.normpath(os.path.join(root, urllib.parse.unquote(url.path)))
                    if os.path.isdir(target):
                        target = os.path.join(target, "index.html")
                    if not os.path.realpath(target).startswith(os.path.realpath(book) + os.sep):
                        problems.append(f"{rel_page}: {href}: points out of the book")
                        continue
                    if not os.path.isfile(target):
                        problems.append(f"{rel_page}: {href}: no such page")
                        continue
                if url.fragment and target.endswith(".html"):
                    fragment = urllib.parse.unquote(url.fragment)
                    if fragment not in parse(target).ids:
                        problems.append(f"{rel_page}: {href}: no #{fragment} in {os.path.relpath(target, book)}")
    return pages, problems


def check_summary(src):
    with open(os.path.join(src, "SUMMARY.md"), encoding="utf-8") as f:
        listed = {os.path.normpath(m) for m in re.findall(r"\]\(([^)#]+\.md)\)", f.read())}
    problems = []
    for root, _dirs, files in os.walk(src):
        for name in files:
            rel = os.path.normpath(os.path.relpath(os.path.join(root, name), src))
            if name.endswith(".md") and rel != "SUMMARY.md" and rel not in listed:
                problems.append(f"{rel}: not a chapter of SUMMARY.md")
    return problems


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    book, src = sys.argv[1], sys.argv[2]
    pages, problems = check_links(book)
    problems += check_summary(src)
    if pages == 0:
        problems.append(f"{book}: no pages (was the book built?)")
    for p in problems:
        print(p)
    print(f"checked the links of {pages} pages: {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
