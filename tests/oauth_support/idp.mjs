// A real OAuth 2.1 authorization server for redmark's OAuth tests: npm
// `oidc-provider` (installed into .cache/npm-oauth by
// scripts/setup-test-deps.sh) on 127.0.0.1:<ephemeral port>, with the
// client-credentials grant, resource indicators (RFC 8707) and JWT access
// tokens (RFC 9068). Loopback http is allowed here only because it is a test.
//
// Clients (secret = id + "-secret"):
//   agent   scopes "mcp rooms:book payments:write", groups ["facilities"]
//   intern  scopes "mcp"                            , groups []
//
// Test-only endpoints beside the provider (deliberate misbehaviour the
// real provider will not do on request):
//   POST /_test/rotate         a new signing key (new kid) signs from now on;
//                              the old one stays published. Answers {kid}.
//                              Body {drop_old: true}: the old keys are no
//                              longer published; {bad_member: true}: /jwks
//                              also carries a member with a numeric `kid`
//                              (which a JWK parser cannot read).
//   POST /_test/mint  {claims} signs `claims` with the current key: an
//                              expired token, another issuer's `iss`.
//   GET  /_test/kid            the current signing kid.
//   GET  /_test/jwks_fetches   how many times /jwks was fetched.
//
// Prints "idp listening on port N" once it serves.
import http from "node:http";
import { pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.env.REDMARK_OAUTH_NPM_DIR + "/node_modules";
const { default: Provider } = await import(pathToFileURL(path.join(modules, "oidc-provider/lib/index.js")));
const jose = await import(pathToFileURL(path.join(modules, "jose/dist/webapi/index.js")));

const SCOPES = "mcp rooms:book payments:write";
const GROUPS = { agent: ["facilities"], intern: [] };

let keys = [];
let current;

async function newKey() {
  const { privateKey } = await jose.generateKeyPair("RS256", { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  jwk.kid = "k" + (keys.length + 1) + "-" + Math.random().toString(36).slice(2, 8);
  jwk.alg = "RS256";
  jwk.use = "sig";
  keys.unshift(jwk); // the first key signs
  return jwk;
}

function provider(issuer) {
  const p = new Provider(issuer, {
    clients: [
      { client_id: "agent", client_secret: "agent-secret", grant_types: ["client_credentials"], redirect_uris: [], response_types: [], scope: SCOPES },
      { client_id: "intern", client_secret: "intern-secret", grant_types: ["client_credentials"], redirect_uris: [], response_types: [], scope: "mcp" },
    ],
    jwks: { keys },
    scopes: SCOPES.split(" "),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resourceIndicator, client) => ({
          scope: client.clientId === "intern" ? "mcp" : SCOPES,
          audience: resourceIndicator,
          accessTokenTTL: 300,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
    extraTokenClaims: async (_ctx, token) => ({ groups: GROUPS[token.clientId] ?? [] }),
  });
  p.proxy = true;
  return p;
}

async function body(req) {
  let text = "";
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : {};
}

current = await newKey();
let issuer;
let handler;
let jwksFetches = 0;
let badMember = false;
const server = http.createServer(async (req, res) => {
  try {
    if (req.url === "/_test/rotate" && req.method === "POST") {
      const opts = await body(req);
      current = await newKey();
      if (opts.drop_old) keys = [current];
      if (opts.bad_member) badMember = true;
      handler = provider(issuer).callback();
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ kid: current.kid }));
    }
    if (req.url === "/jwks") jwksFetches += 1;
    if (req.url === "/jwks" && badMember) {
      // The provider's own /jwks, plus one member no JWK parser reads.
      const published = keys.map(({ kty, n, e, kid, alg, use }) => ({ kty, n, e, kid, alg, use }));
      published.push({ kty: "RSA", kid: 42, use: "sig", n: current.n, e: current.e });
      res.writeHead(200, { "content-type": "application/jwk-set+json" });
      return res.end(JSON.stringify({ keys: published }));
    }
    if (req.url === "/_test/jwks_fetches") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ count: jwksFetches }));
    }
    if (req.url === "/_test/kid") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ kid: current.kid }));
    }
    if (req.url === "/_test/mint" && req.method === "POST") {
      const { claims } = await body(req);
      const key = await jose.importJWK(current, "RS256");
      const token = await new jose.SignJWT(claims)
        .setProtectedHeader({ alg: "RS256", kid: current.kid, typ: "at+jwt" })
        .sign(key);
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ token }));
    }
    return handler(req, res);
  } catch (e) {
    res.writeHead(500);
    res.end(String(e));
  }
});
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  issuer = `http://127.0.0.1:${port}`;
  handler = provider(issuer).callback();
  console.log(`idp listening on port ${port}`);
});
