# Sourced by scripts that install Debian packages whose programs they run
# themselves (scripts/setup-test-deps.sh: redis-server, nginx;
# scripts/bench.sh: nginx). Installing such a package as is enables its
# service at boot and starts it (nginx on port 80, prometheus, redis on 6379):
# a side effect nobody asked for. Needs root and a `log` function.

# `apt-get install` as root with every service start refused (policy-rc.d exit
# 101, as in Debian's container images; an existing policy-rc.d is set aside
# and put back), then the units the packages enabled at boot disabled again:
# the programs land in /usr, no service runs or starts at the next boot.
apt_install_without_services() { # package...
    local policy=/usr/sbin/policy-rc.d saved="" pkg
    if [[ -e $policy ]]; then
        saved="$policy.redmark-saved.$$"
        mv "$policy" "$saved"
    fi
    # The machine's own policy comes back however the install ends,
    # interrupted included.
    restore_policy() {
        rm -f "$policy"
        if [[ -n $saved ]]; then mv "$saved" "$policy"; fi
    }
    trap 'restore_policy; exit 130' INT TERM
    printf '#!/bin/sh\n# a redmark script: no service starts while it installs packages\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get update >&2 \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2 \
        || rc=$?
    trap - INT TERM
    restore_policy
    [[ $rc -eq 0 ]] || return "$rc"
    for pkg in "$@"; do
        # Offline edits of the boot-time links: works with or without a running systemd.
        if command -v systemctl >/dev/null 2>&1 && [[ -e "/lib/systemd/system/$pkg.service" ]]; then
            systemctl disable --quiet "$pkg.service" >&2 || log "could not disable $pkg.service"
        fi
        if command -v update-rc.d >/dev/null 2>&1 && [[ -e "/etc/init.d/$pkg" ]]; then
            update-rc.d "$pkg" disable >/dev/null 2>&1 || true
        fi
    done
}
