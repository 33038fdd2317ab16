/**
 * A real `querator serve` (and `querator worker`) over a throwaway SQLite
 * store, started by the tests: the Python is $QUERATOR_PYTHON, else the
 * repository's .venv, else python3.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PACKAGE = resolve(HERE, "..");
const ROOT = resolve(PACKAGE, "..", "..");
export const FLOWS = join(PACKAGE, "test", "flows.py");
const STARTUP_MS = 60_000;

function python() {
  if (process.env.QUERATOR_PYTHON) return process.env.QUERATOR_PYTHON;
  const venv = join(ROOT, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** The first line a process prints that holds `http://`: the URL it serves. */
function servedUrl(child) {
  return new Promise((resolveUrl, reject) => {
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`querator serve did not start: ${err}`)), STARTUP_MS);
    child.stdout?.on("data", (chunk) => {
      out += chunk.toString();
      const found = /http:\/\/\S+/.exec(out);
      if (found) {
        clearTimeout(timer);
        resolveUrl(found[0]);
      }
    });
    child.stderr?.on("data", (chunk) => (err += chunk.toString()));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`querator serve exited (${code}): ${err}`));
    });
  });
}

/** Poll `GET /health` until it answers 200 (a deadline, no fixed sleep). */
async function healthy(url) {
  const deadline = Date.now() + STARTUP_MS;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url}/health did not answer`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

function stopped(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.on("exit", () => {
      clearTimeout(kill);
      done();
    });
    child.kill("SIGTERM");
  });
}

/** Run `querator ...args` to its end; rejects when it fails. */
function ran(args, options) {
  return new Promise((done, reject) => {
    const child = spawn(python(), ["-m", "querator.cli", ...args], { ...options, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr?.on("data", (chunk) => (err += chunk.toString()));
    child.on("exit", (code) => (code === 0 ? done() : reject(new Error(`querator ${args.join(" ")} exited (${code}): ${err}`))));
  });
}

/** The namespace the test server serves besides its own. */
export const NAMESPACE = "acme";

/**
 * Start `querator serve --app flows.py` (serving its own namespace and
 * {@link NAMESPACE}) and `querator worker flows.py` on one new store;
 * resolves to `{ url, stop() }`.
 */
export async function serve() {
  const dir = mkdtempSync(join(tmpdir(), "querator-ts-"));
  const store = `sqlite:///${join(dir, "ts.db")}`;
  const env = { ...process.env, PYTHONPATH: ROOT };
  const options = { env, stdio: ["ignore", "pipe", "pipe"] };
  await ran(["namespaces", "create", NAMESPACE, "--url", store], options);
  const server = spawn(
    python(),
    [
      "-m", "querator.cli", "serve", "--url", store, "--port", "0", "--log-level", "warning",
      "--app", FLOWS, "--serve-namespaces", NAMESPACE,
    ],
    options,
  );
  const children = [server];
  const stop = async () => {
    await Promise.all(children.map(stopped));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const url = await servedUrl(server);
    await healthy(url);
    const worker = spawn(python(), ["-m", "querator.cli", "worker", "--url", store, FLOWS], options);
    worker.stderr?.resume();
    worker.stdout?.resume();
    children.push(worker);
    return { url, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
