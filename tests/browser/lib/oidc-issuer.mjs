// A test OpenID Connect issuer on loopback, for the browser tests of the
// consumer sign-in: discovery, JWKS, an authorization endpoint that signs
// in a fixed test user at once (no login form), and a token endpoint that
// checks the code, the redirect URI, the client and the PKCE verifier
// (S256) before it issues RS256 tokens the catalog accepts.

import { createHash, createSign, generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

export class OidcIssuer {
  /**
   * @param {object} options
   * @param {string} options.clientID    the only client
   * @param {string} options.redirectUri its registered redirect URI
   * @param {string} options.audience    `aud` of the access tokens (the catalog's --oidc-audience)
   * @param {object} options.user        { sub, name, roles }
   */
  constructor({ clientID, redirectUri, audience, user }) {
    Object.assign(this, { clientID, redirectUri, audience, user });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.privateKey = privateKey;
    this.jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'browser-test', alg: 'RS256', use: 'sig' };
    this.codes = new Map();
    /** What the token endpoint refused, for assertions. */
    this.refusals = [];
    this.tokenRequests = 0;
  }

  sign(claims) {
    const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: this.jwk.kid }));
    const body = b64url(JSON.stringify(claims));
    const signer = createSign('RSA-SHA256');
    signer.update(`${header}.${body}`);
    return `${header}.${body}.${b64url(signer.sign(this.privateKey))}`;
  }

  async start() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  async stop() {
    if (!this.server) return;
    // Chromium holds a preconnected socket to the issuer that never carries a
    // request: close() alone waits until Node's 60 s headersTimeout drops it
    // (a minute of every browser run). The scenario's checks are done here.
    const closed = new Promise((resolve) => this.server.close(resolve));
    this.server.closeAllConnections();
    await closed;
  }

  handle(req, res) {
    const url = new URL(req.url, this.url);
    const json = (status, body, headers = {}) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers });
      res.end(JSON.stringify(body));
    };
    // The catalog's UI calls discovery and the token endpoint from its own origin.
    const cors = { 'Access-Control-Allow-Origin': req.headers.origin ?? '*' };
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...cors, 'Access-Control-Allow-Methods': 'GET, POST', 'Access-Control-Allow-Headers': 'Content-Type, Accept' });
      res.end();
      return;
    }
    if (url.pathname === '/.well-known/openid-configuration') {
      json(200, {
        issuer: this.url,
        authorization_endpoint: `${this.url}/authorize`,
        token_endpoint: `${this.url}/token`,
        jwks_uri: `${this.url}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
      }, cors);
      return;
    }
    if (url.pathname === '/jwks') {
      json(200, { keys: [this.jwk] }, cors);
      return;
    }
    if (url.pathname === '/authorize') {
      const p = url.searchParams;
      const problem = p.get('response_type') !== 'code' ? 'unsupported_response_type'
        : p.get('client_id') !== this.clientID ? 'unauthorized_client'
          : p.get('redirect_uri') !== this.redirectUri ? 'invalid_request'
            : p.get('code_challenge_method') !== 'S256' || !p.get('code_challenge') ? 'invalid_request' : null;
      if (problem) {
        this.refusals.push(`authorize: ${problem}`);
        res.writeHead(400, { 'Content-Type': 'text/plain' });
        res.end(problem);
        return;
      }
      const code = b64url(randomBytes(24));
      this.codes.set(code, { challenge: p.get('code_challenge'), redirectUri: p.get('redirect_uri'), clientID: p.get('client_id') });
      const back = new URL(p.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', p.get('state') ?? '');
      res.writeHead(302, { Location: back.toString() });
      res.end();
      return;
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      this.tokenRequests += 1;
      let raw = '';
      req.on('data', (chunk) => { raw += chunk; });
      req.on('end', () => {
        const p = new URLSearchParams(raw);
        const grant = this.codes.get(p.get('code') ?? '');
        this.codes.delete(p.get('code') ?? '');
        const verifier = p.get('code_verifier') ?? '';
        let problem = null;
        if (p.get('grant_type') !== 'authorization_code') problem = 'unsupported_grant_type';
        else if (!grant) problem = 'invalid_grant: unknown or used code';
        else if (grant.clientID !== p.get('client_id')) problem = 'invalid_client';
        else if (grant.redirectUri !== p.get('redirect_uri')) problem = 'invalid_grant: redirect_uri differs';
        else if (b64url(createHash('sha256').update(verifier).digest()) !== grant.challenge) problem = 'invalid_grant: PKCE verifier does not match';
        if (problem) {
          this.refusals.push(`token: ${problem}`);
          json(400, { error: problem.split(':')[0], error_description: problem }, cors);
          return;
        }
        const now = Math.floor(Date.now() / 1000);
        const common = { iss: this.url, sub: this.user.sub, name: this.user.name, iat: now, exp: now + 3600 };
        json(200, {
          token_type: 'Bearer',
          expires_in: 3600,
          access_token: this.sign({ ...common, aud: this.audience, roles: this.user.roles }),
          id_token: this.sign({ ...common, aud: this.clientID }),
        }, cors);
      });
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('not found');
  }
}
