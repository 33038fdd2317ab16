/**
 * A client of querator's HTTP API (`querator serve`) on `fetch` alone:
 * queues (create, produce, lease, complete, retry) and workflow runs
 * (start by name, await the result, status, cancel).
 *
 * Every call is one `POST /v1/<call>` with a JSON body (DUH-RPC). A refused
 * call throws a {@link QueratorError} carrying the reply's code, message and
 * details (`details.type` names the library's exception: `InvalidArgument`,
 * `QueueNotFound`, `Conflict`, `RequestTimeout`, ...).
 */

/** What a call answered when it did not succeed. */
export class QueratorError extends Error {
  /** The HTTP status: 400 bad input, 401/403 tokens, 453 failed, 454 retry, 5xx server. */
  readonly code: number;
  /** The library's exception name (`details.type`), or "" from another server. */
  readonly type: string;
  /** The reply's details (field, rule, queue, per-item conflict reasons, ...). */
  readonly details: Record<string, string>;

  constructor(code: number, message: string, details: Record<string, string> = {}) {
    super(message);
    this.name = "QueratorError";
    this.code = code;
    this.type = details.type ?? "";
    this.details = details;
  }

  /** True when trying again later may succeed (454: a long poll found nothing, or the store is unavailable). */
  get retryable(): boolean {
    return this.code === 454 || this.code >= 500;
  }
}

/** Options of a client. */
export interface ClientOptions {
  /** A bearer token (`qrt_...`) when the server requires one. */
  token?: string;
  /** Milliseconds a call may take beyond its own long poll (default 30 000). */
  timeoutMs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /**
   * The namespace every call is for, sent as the `Querator-Namespace` header
   * (default: the server's own). The server must serve it (`querator serve
   * --serve-namespaces`), else calls are refused with 403 Forbidden.
   */
  namespace?: string;
}

/** Accepted namespace names: lower-case words of letters and digits joined by single underscores. */
const NAMESPACE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;
/** The longest namespace name. */
const MAX_NAMESPACE = 30;

/** A queue's settings; durations in seconds. */
export interface QueueSettings {
  leaseTimeout?: number;
  expireTimeout?: number;
  maxAttempts?: number;
  deadQueue?: string;
  partitions?: number;
  reference?: string;
}

/** An item to produce. A string payload is sent as UTF-8 text, bytes as base64. */
export interface NewItem {
  payload: string | Uint8Array;
  kind?: string;
  encoding?: string;
  reference?: string;
  headers?: Record<string, string>;
  dedupKey?: string;
  partitionKey?: string;
  /** Not leasable before this instant. */
  enqueueAt?: Date;
}

/** A leased item: its payload, and the id and version that complete or retry it. */
export interface LeasedItem {
  id: string;
  version: number;
  queue: string;
  partition: number;
  attempts: number;
  kind: string;
  encoding: string;
  reference: string;
  headers: Record<string, string>;
  dedupKey: string | null;
  leaseDeadline: Date | null;
  payload: Uint8Array;
  /** The payload decoded as UTF-8 text. */
  text(): string;
  /** The payload parsed as JSON. */
  json<T = unknown>(): T;
}

/** How an ended run ended. */
export interface RunResult<T = unknown> {
  runId: string;
  /** `completed`, `failed`, `cancelled`, or a saga's `compensated` / `compensation_failed`. */
  status: string;
  /** The workflow's return value (JSON), when completed. */
  result: T | null;
  /** Why it did not complete: the error's type (`StepFailed`, `WorkflowTimeout`, ...), else null. */
  errorType: string | null;
  errorMessage: string | null;
  /** True for a saga that did not complete (Python's client raises `SagaFailed` for it). */
  saga: boolean;
  /**
   * A saga's compensations that ran, in order, as `"name@position"` of the step
   * each undid (empty otherwise; Python's `SagaFailed.compensations`).
   */
  compensations: string[];
}

/** Options of {@link Querator.start}. */
export interface StartOptions {
  args?: unknown[];
  kwargs?: Record<string, unknown>;
  /** Starting twice with one key starts one run (and answers its id). */
  idempotencyKey?: string;
  /** The run's workflow queue (default: the workflow's). */
  queue?: string;
  /** Seconds before the run starts. */
  delay?: number;
}

/** A page of a run's stream: {@link Querator.readStreamPage}. */
export interface StreamPage<T = unknown> {
  /** The values from the offset asked for, in stream order (empty when none came in time). */
  values: T[];
  /** The offset to ask for next. */
  nextOffset: number;
  /** True when no value comes after these (the stream is closed or its run ended). */
  ended: boolean;
}

const LONG_POLL_MAX = 15 * 60;
/** The long poll of each page while {@link Querator.readStream} follows a stream. */
const STREAM_WAIT = 60;
const LONG_POLL_MIN = 0.011;

/** Seconds as a Go duration string, as DUH-RPC bodies write them (`"1.5s"`). */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new QueratorError(400, `duration is invalid; ${seconds} is not a non-negative number of seconds`);
  }
  const ms = Math.round(seconds * 1000);
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

function base64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

function unbase64(text: string): Uint8Array {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

type Wire = Record<string, unknown>;

function leased(item: Wire): LeasedItem {
  const payload = unbase64(String(item.bytes ?? ""));
  const deadline = item.lease_deadline ? new Date(String(item.lease_deadline)) : null;
  return {
    id: String(item.id),
    version: Number(item.version),
    queue: String(item.queue ?? ""),
    partition: Number(item.partition ?? 0),
    attempts: Number(item.attempts ?? 0),
    kind: String(item.kind ?? ""),
    encoding: String(item.encoding ?? ""),
    reference: String(item.reference ?? ""),
    headers: (item.headers as Record<string, string>) ?? {},
    dedupKey: (item.dedup_key as string | null) ?? null,
    leaseDeadline: deadline,
    payload,
    text: () => new TextDecoder().decode(payload),
    json: <T>() => JSON.parse(new TextDecoder().decode(payload)) as T,
  };
}

function wireItem(item: NewItem): Wire {
  const body: Wire = typeof item.payload === "string" ? { utf8: item.payload } : { bytes: base64(item.payload) };
  if (item.kind !== undefined) body.kind = item.kind;
  if (item.encoding !== undefined) body.encoding = item.encoding;
  if (item.reference !== undefined) body.reference = item.reference;
  if (item.headers !== undefined) body.headers = item.headers;
  if (item.dedupKey !== undefined) body.dedup_key = item.dedupKey;
  if (item.partitionKey !== undefined) body.partition_key = item.partitionKey;
  if (item.enqueueAt !== undefined) body.enqueue_at = item.enqueueAt.toISOString();
  return body;
}

/** An item to complete or retry: a leased item, or its id and version. */
export type ItemRef = { id: string; version: number };

/** A client of one querator HTTP server. */
export class Querator {
  readonly url: string;
  /** The namespace the calls are for (undefined: the server's own). */
  readonly namespace: string | undefined;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetcher: typeof fetch;

  constructor(url = "http://127.0.0.1:2319", options: ClientOptions = {}) {
    if (!/^https?:\/\//.test(url)) {
      throw new QueratorError(400, `url is invalid; must be an http:// or https:// URL, got '${url}'`);
    }
    this.url = url.replace(/\/+$/, "");
    // querator's own reply fields (item versions, ids, ...) besides Querator's
    this.headers = { "Content-Type": "application/json", "Querator-Extras": "true" };
    if (options.token) this.headers.Authorization = `Bearer ${options.token}`;
    if (options.namespace !== undefined) {
      const ns = options.namespace;
      if (ns.length > MAX_NAMESPACE || !NAMESPACE.test(ns)) {
        throw new QueratorError(
          400,
          `namespace is invalid; '${ns}' must be lower-case letters and digits in words joined by single underscores, starting with a letter, at most ${MAX_NAMESPACE} characters`,
          { type: "InvalidArgument", field: "namespace" },
        );
      }
      this.headers["Querator-Namespace"] = ns;
    }
    this.namespace = options.namespace;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.fetcher = options.fetch ?? globalThis.fetch;
  }

  /** One call: `POST /v1/<path>` with `body`; the reply's JSON, or a QueratorError. */
  async call<T = Wire>(path: string, body: Wire, waitSeconds = 0): Promise<T> {
    let response: Response;
    try {
      response = await this.fetcher(`${this.url}/v1/${path}`, {
        method: "POST",
        headers: this.headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs + waitSeconds * 1000),
      });
    } catch (error) {
      throw new QueratorError(503, `store unavailable; ${this.url}/v1/${path}: ${String(error)}`, { type: "Unavailable" });
    }
    const text = await response.text();
    if (response.status !== 200) {
      let message = text.slice(0, 200) || response.statusText;
      let details: Record<string, string> = {};
      try {
        const reply = JSON.parse(text) as { message?: string; details?: Record<string, string> };
        message = reply.message ?? message;
        details = reply.details ?? {};
      } catch {
        // not a DUH-RPC reply (a proxy's page): keep the text
      }
      throw new QueratorError(response.status, message, details);
    }
    return JSON.parse(text) as T;
  }

  // -- queues ----------------------------------------------------------------

  /** Create a queue (`existOk`: an existing one is no error). */
  async createQueue(name: string, settings: QueueSettings = {}, existOk = false): Promise<void> {
    const body: Wire = { queue_name: name, exist_ok: existOk };
    if (settings.leaseTimeout !== undefined) body.lease_timeout = duration(settings.leaseTimeout);
    if (settings.expireTimeout !== undefined) body.expire_timeout = duration(settings.expireTimeout);
    if (settings.maxAttempts !== undefined) body.max_attempts = settings.maxAttempts;
    if (settings.deadQueue !== undefined) body.dead_queue = settings.deadQueue;
    if (settings.partitions !== undefined) body.requested_partitions = settings.partitions;
    if (settings.reference !== undefined) body.reference = settings.reference;
    await this.call("queues.create", body);
  }

  /** Delete a queue (`force`: even when it holds items). */
  async deleteQueue(name: string, force = false): Promise<void> {
    await this.call("queues.delete", { queue_name: name, force });
  }

  /** Produce items; their ids, in order. */
  async produce(queue: string, items: NewItem[]): Promise<string[]> {
    const body = { queue_name: queue, request_timeout: duration(this.timeoutMs / 1000), items: items.map(wireItem) };
    return (await this.call<{ ids: string[] }>("queue.produce", body)).ids;
  }

  /**
   * Lease up to `batchSize` items, waiting up to `timeout` seconds for one
   * (a long poll). Throws a QueratorError of type `RequestTimeout` (454) when
   * none came in time.
   */
  async lease(
    queue: string,
    options: { clientId: string; batchSize?: number; timeout?: number; kinds?: string[] },
  ): Promise<LeasedItem[]> {
    const deadline = Date.now() + (options.timeout ?? 0) * 1000;
    for (;;) {
      const left = (deadline - Date.now()) / 1000;
      const wait = Math.min(Math.max(left, LONG_POLL_MIN), LONG_POLL_MAX);
      const body: Wire = {
        queue_name: queue,
        client_id: options.clientId,
        batch_size: options.batchSize ?? 1,
        request_timeout: duration(wait),
      };
      if (options.kinds) body.kinds = options.kinds;
      try {
        const reply = await this.call<{ items: Wire[] }>("queue.lease", body, wait);
        return reply.items.map(leased);
      } catch (error) {
        if (error instanceof QueratorError && error.type === "RequestTimeout" && Date.now() + 10 < deadline) continue;
        throw error;
      }
    }
  }

  /** Complete leased items: they leave the queue. All or nothing (400 `Conflict` when one is not held). */
  async complete(queue: string, items: ItemRef[]): Promise<void> {
    const refs = items.map(({ id, version }) => ({ id, version }));
    await this.call("queue.complete", { queue_name: queue, request_timeout: duration(this.timeoutMs / 1000), items: refs });
  }

  /**
   * Give leased items back: leasable again at `retryAt` (default now);
   * `dead` moves them to the dead queue now; `reason` goes with an item dead-lettered.
   */
  async retry(queue: string, items: ItemRef[], options: { retryAt?: Date; dead?: boolean; reason?: string } = {}): Promise<void> {
    const refs = items.map(({ id, version }) => {
      const ref: Wire = { id, version, dead: options.dead ?? false };
      if (options.retryAt) ref.retry_at = options.retryAt.toISOString();
      if (options.reason !== undefined) ref.reason = options.reason;
      return ref;
    });
    await this.call("queue.retry", { queue_name: queue, items: refs });
  }

  /** Item counts of a queue, per partition (Querator's stats reply). */
  async stats(queue: string): Promise<Wire> {
    return this.call("queue.stats", { queue_name: queue });
  }

  // -- workflow runs -----------------------------------------------------------

  /** Start a run of a workflow the server knows (`querator serve --app`); its run id. */
  async start(workflow: string, options: StartOptions = {}): Promise<string> {
    const body: Wire = { workflow, args: options.args ?? [], kwargs: options.kwargs ?? {} };
    if (options.idempotencyKey !== undefined) body.idempotency_key = options.idempotencyKey;
    if (options.queue !== undefined) body.queue = options.queue;
    if (options.delay !== undefined) body.delay = duration(options.delay);
    return (await this.call<{ run_id: string }>("workflows.start", body)).run_id;
  }

  /**
   * Wait up to `timeout` seconds (default: forever) for a run to end; how it
   * ended (a failed run is a result too: look at `status`). Throws a
   * QueratorError of type `RequestTimeout` when it has not ended in time.
   */
  async result<T = unknown>(runId: string, timeout?: number): Promise<RunResult<T>> {
    const deadline = timeout === undefined ? Infinity : Date.now() + timeout * 1000;
    for (;;) {
      const left = (deadline - Date.now()) / 1000;
      const wait = Math.min(Math.max(left, LONG_POLL_MIN), LONG_POLL_MAX);
      try {
        const reply = await this.call<Wire>("runs.result", { run_id: runId, request_timeout: duration(wait) }, wait);
        return {
          runId: String(reply.run_id),
          status: String(reply.status),
          result: (reply.result ?? null) as T | null,
          errorType: (reply.error_type as string | null) ?? null,
          errorMessage: (reply.error_message as string | null) ?? null,
          saga: reply.saga === true,
          compensations: Array.isArray(reply.compensations) ? reply.compensations.map(String) : [],
        };
      } catch (error) {
        if (error instanceof QueratorError && error.type === "RequestTimeout" && Date.now() + 10 < deadline) continue;
        throw error;
      }
    }
  }

  /** A run's status: `running`, `completed`, `failed`, `cancelled`, ... (453 `RunNotFound` for an unknown run). */
  async status(runId: string): Promise<string> {
    return String((await this.call<Wire>("runs.get", { run_id: runId })).status);
  }

  /** Ask a run to end as cancelled; false when it had already ended. */
  async cancel(runId: string, reason = ""): Promise<boolean> {
    return (await this.call<{ changed: boolean }>("runs.cancel", { run_id: runId, reason })).changed;
  }

  // -- talking to a run ---------------------------------------------------------

  /**
   * Send `value` (any JSON value) to a run's mailbox under `topic`, read by
   * the run's `recv(topic)`; sending again with the same `idempotencyKey`
   * (same run and topic) is a no-op. 453 `RunNotFound` / `RunFinished`.
   */
  async send(runId: string, topic: string, value: unknown, idempotencyKey?: string): Promise<void> {
    const body: Wire = { run_id: runId, topic, value: value ?? null };
    if (idempotencyKey !== undefined) body.idempotency_key = idempotencyKey;
    await this.call("runs.send", body);
  }

  /**
   * Emit an event by name: every run waiting in `wait_for_event(name)` wakes,
   * later waits see it too. True when this emit stored it (the first of the
   * name); false when the name was emitted before (its first payload stands).
   */
  async emitEvent(name: string, payload: unknown): Promise<boolean> {
    return (await this.call<{ first: boolean }>("events.emit", { name, payload: payload ?? null })).first;
  }

  /**
   * The latest value a run published under `key` (`set_event`), waiting up to
   * `timeout` seconds (at most 15 minutes) for the first one; null when none
   * came in time.
   */
  async getEvent<T = unknown>(runId: string, key: string, timeout = 0): Promise<T | null> {
    const wait = pollWait(timeout);
    const body: Wire = { run_id: runId, key };
    if (wait) body.request_timeout = duration(wait);
    return ((await this.call<{ value?: T | null }>("runs.get_event", body, wait)).value ?? null) as T | null;
  }

  /**
   * A run's stream `key` from `offset`, waiting up to `timeout` seconds (at
   * most 15 minutes) for the first value.
   */
  async readStreamPage<T = unknown>(runId: string, key: string, offset = 0, timeout = 0): Promise<StreamPage<T>> {
    const wait = pollWait(timeout);
    const body: Wire = { run_id: runId, key, offset };
    if (wait) body.request_timeout = duration(wait);
    const reply = await this.call<{ values: T[]; next_offset: number; ended: boolean }>("runs.read_stream", body, wait);
    return { values: reply.values, nextOffset: reply.next_offset, ended: reply.ended };
  }

  /**
   * Every value of a run's stream `key` from `offset`, as they come (long
   * polls), until the stream is closed or its run ends:
   * `for await (const line of q.readStream(runId, "log")) ...`.
   */
  async *readStream<T = unknown>(runId: string, key: string, offset = 0): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const page = await this.readStreamPage<T>(runId, key, offset, STREAM_WAIT);
      yield* page.values;
      if (page.ended) return;
      offset = page.nextOffset;
    }
  }
}

/** A long poll's seconds for a wait of `timeout` (0: answer at once). */
function pollWait(timeout: number): number {
  if (!Number.isFinite(timeout) || timeout < 0) {
    throw new QueratorError(400, `timeout is invalid; ${timeout} is not a non-negative number of seconds`, {
      type: "InvalidArgument",
      field: "timeout",
    });
  }
  return timeout ? Math.min(Math.max(timeout, LONG_POLL_MIN), LONG_POLL_MAX) : 0;
}
