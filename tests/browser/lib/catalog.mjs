// Start and stop the real catalog binary for the browser tests: a free
// loopback port, a fresh data directory, logs kept in a file to print when
// something fails, and a kill that always happens (even on Ctrl-C).

import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import net from 'node:net';

/** A loopback port nobody listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const running = new Set();

/** Kill whatever is still running when the test process exits, however it exits. */
function killAllSync() {
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAllSync);

export class Catalog {
  /**
   * @param {object} options
   * @param {string} options.bin       path to the catalog binary
   * @param {number} options.port      port to listen on (127.0.0.1)
   * @param {string} options.dataDir   the embedded store's directory
   * @param {string} options.logFile   where stdout/stderr go
   * @param {string[]} [options.extraArgs] more flags (e.g. --oidc-issuer …)
   * @param {object} [options.env]       more environment (e.g. CATALOG_ADMIN_SECRET)
   */
  constructor({ bin, port, dataDir, logFile, extraArgs = [], env = {} }) {
    this.extraArgs = extraArgs;
    this.env = env;
    this.bin = bin;
    this.port = port;
    this.dataDir = dataDir;
    this.logFile = logFile;
    this.child = null;
    this.url = `http://127.0.0.1:${port}`;
  }

  args() {
    return ['--listen', `127.0.0.1:${this.port}`, '--data-dir', this.dataDir, ...this.extraArgs];
  }

  /** Start the binary and wait until it accepts connections. */
  async start({ timeoutMs = 30000 } = {}) {
    const log = createWriteStream(this.logFile, { flags: 'a' });
    const child = spawn(this.bin, this.args(), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', NO_COLOR: '1', ...this.env },
    });
    this.child = child;
    running.add(child);
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    let exited = null;
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      running.delete(child);
    });
    child.once('error', (err) => {
      exited = { code: null, signal: null, err };
      running.delete(child);
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (exited) {
        throw new Error(`catalog exited before listening (${exited.err?.message ?? `code ${exited.code}, signal ${exited.signal}`}); log: ${this.logFile}`);
      }
      if (await canConnect(this.port)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`catalog did not listen on ${this.port} within ${timeoutMs} ms; log: ${this.logFile}`);
  }

  /** Stop it: SIGTERM, then SIGKILL if it lingers. */
  async stop({ graceMs = 5000 } = {}) {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(timer);
    running.delete(child);
  }
}
