/** The TypeScript client against a real `querator serve` (node:test). */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Querator, QueratorError } from "../dist/index.js";
import { NAMESPACE, serve } from "./server.mjs";

let served;
let q;

before(async () => {
  served = await serve();
  q = new Querator(served.url);
});

after(async () => {
  await served?.stop();
});

/** The QueratorError `call` is refused with (fails the test when it succeeds). */
async function refused(call) {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof QueratorError, String(error));
    return error;
  }
  assert.fail("the call was not refused");
}

describe("queues", () => {
  it("produces, leases and completes items", async () => {
    await q.createQueue("ts-jobs", { leaseTimeout: 30 });
    const ids = await q.produce("ts-jobs", [
      { payload: "hello" },
      { payload: JSON.stringify({ n: 2 }), encoding: "json", dedupKey: "two" },
      { payload: new Uint8Array([0, 255, 7]), kind: "raw" },
    ]);
    assert.equal(ids.length, 3);
    const items = await q.lease("ts-jobs", { clientId: "ts-worker", batchSize: 3, timeout: 5 });
    assert.deepEqual(items.map((i) => i.id), ids);
    assert.equal(items[0].text(), "hello");
    assert.deepEqual(items[1].json(), { n: 2 });
    assert.equal(items[1].dedupKey, "two");
    assert.deepEqual([...items[2].payload], [0, 255, 7]);
    assert.equal(items[2].kind, "raw");
    assert.ok(items.every((i) => i.version > 0 && i.leaseDeadline instanceof Date));
    await q.complete("ts-jobs", items);
    const again = await refused(q.complete("ts-jobs", items));
    assert.equal(again.code, 400);
    assert.equal(again.type, "Conflict");
  });

  it("retries items and dead-letters them", async () => {
    await q.createQueue("ts-dead");
    await q.createQueue("ts-retry", { deadQueue: "ts-dead", maxAttempts: 5 });
    await q.produce("ts-retry", [{ payload: "again" }]);
    const [first] = await q.lease("ts-retry", { clientId: "w", timeout: 5 });
    await q.retry("ts-retry", [first]);
    const [second] = await q.lease("ts-retry", { clientId: "w", timeout: 5 });
    assert.equal(second.id, first.id);
    assert.equal(second.attempts, 2); // leases so far
    await q.retry("ts-retry", [second], { dead: true, reason: "poison" });
    const [dead] = await q.lease("ts-dead", { clientId: "w", timeout: 5 });
    assert.equal(dead.text(), "again");
    const empty = await refused(q.lease("ts-retry", { clientId: "w", timeout: 0.05 }));
    assert.equal(empty.code, 454);
    assert.equal(empty.type, "RequestTimeout");
    assert.ok(empty.retryable);
  });

  it("answers bad input with the library's errors", async () => {
    const missing = await refused(q.produce("ts-no-such-queue", [{ payload: "x" }]));
    assert.equal(missing.code, 400);
    assert.equal(missing.type, "QueueNotFound");
    const bad = await refused(q.lease("ts-jobs", { clientId: "", timeout: 0 }));
    assert.equal(bad.type, "InvalidArgument");
    assert.equal(bad.details.field, "client_id");
    assert.throws(() => new Querator("ftp://x"), QueratorError);
  });
});

describe("namespaces", () => {
  it("sends every call to the namespace it names", async () => {
    const acme = new Querator(served.url, { namespace: NAMESPACE });
    assert.equal(acme.namespace, NAMESPACE);
    await acme.createQueue("ts-ns");
    await acme.produce("ts-ns", [{ payload: "in acme" }]);
    const absent = await refused(q.produce("ts-ns", [{ payload: "x" }])); // the server's own namespace
    assert.equal(absent.type, "QueueNotFound");
    const [item] = await acme.lease("ts-ns", { clientId: "w", timeout: 5 });
    assert.equal(item.text(), "in acme");
    await acme.complete("ts-ns", [item]);
  });

  it("refuses a namespace the server does not serve, and a bad name before any call", async () => {
    const other = new Querator(served.url, { namespace: "globex" });
    const refusedNs = await refused(other.createQueue("ts-globex"));
    assert.equal(refusedNs.code, 403);
    assert.equal(refusedNs.type, "Forbidden");
    for (const bad of ["Acme", "1acme", "a__b", "a".repeat(31), ""]) {
      assert.throws(() => new Querator(served.url, { namespace: bad }), QueratorError, bad);
    }
    try {
      new Querator(served.url, { namespace: "Bad-Name" });
      assert.fail("a bad namespace was accepted");
    } catch (error) {
      assert.ok(error instanceof QueratorError);
      assert.equal(error.type, "InvalidArgument");
      assert.equal(error.details.field, "namespace");
    }
  });
});

describe("workflow runs", () => {
  it("starts a run by name and awaits its result", async () => {
    const runId = await q.start("ts.greet", { args: ["ada"], kwargs: { punctuation: "?" }, idempotencyKey: "ts-ada" });
    assert.equal(await q.start("ts.greet", { args: ["ada"], kwargs: { punctuation: "?" }, idempotencyKey: "ts-ada" }), runId);
    const done = await q.result(runId, 60);
    assert.deepEqual(done, {
      runId,
      status: "completed",
      result: "HELLO, ADA?",
      errorType: null,
      errorMessage: null,
      saga: false,
      compensations: [],
    });
    assert.equal(await q.status(runId), "completed");
    assert.equal(await q.cancel(runId), false);
  });

  it("tells how a saga that failed was compensated", async () => {
    const runId = await q.start("ts.trip", { args: ["t1"] });
    const done = await q.result(runId, 60);
    assert.equal(done.status, "compensated");
    assert.equal(done.saga, true);
    assert.equal(done.result, null);
    assert.equal(done.errorType, "StepFailed");
    assert.match(done.errorMessage ?? "", /card declined for t1/);
    assert.deepEqual(done.compensations, ["ts.release@0"]);
    assert.equal(await q.status(runId), "compensated");
  });

  it("refuses an unknown workflow and an unknown run", async () => {
    const unknown = await refused(q.start("ts.nope"));
    assert.equal(unknown.type, "InvalidArgument");
    assert.equal(unknown.details.field, "workflow");
    const run = await refused(q.status("no-such-run"));
    assert.equal(run.type, "RunNotFound");
  });
});

describe("talking to a run", () => {
  it("sends messages, emits events, reads published state and streams", async () => {
    const runId = await q.start("ts.chat", { args: ["ada"] });
    assert.deepEqual(await q.getEvent(runId, "status", 60), { waiting_for: "reply" });
    const first = await q.readStreamPage(runId, "log", 0, 60);
    assert.deepEqual(first.values, ["hello ada"]);
    assert.equal(first.nextOffset, 1);
    assert.equal(first.ended, false);
    assert.equal(await q.getEvent(runId, "never-published"), null); // no wait: answered at once
    await q.send(runId, "reply", "yes", "ts-reply-1");
    await q.send(runId, "reply", "a second reply, dropped", "ts-reply-1"); // same key: a no-op
    assert.equal(await q.emitEvent("ts.go.ada", { go: true }), true);
    assert.equal(await q.emitEvent("ts.go.ada", { go: false }), false); // the first payload stands
    const lines = [];
    for await (const line of q.readStream(runId, "log")) lines.push(line);
    assert.deepEqual(lines, ["hello ada", "yes", { go: true }]);
    const done = await q.result(runId, 60);
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, { answer: "yes", event: { go: true } });
    assert.deepEqual(await q.getEvent(runId, "status"), { waiting_for: "event" });
    const tail = await q.readStreamPage(runId, "log", 3);
    assert.deepEqual(tail, { values: [], nextOffset: 3, ended: true });
    const finished = await refused(q.send(runId, "reply", "too late"));
    assert.equal(finished.type, "RunFinished");
  });

  it("refuses an unknown run and bad input", async () => {
    const missing = await refused(q.send("no-such-run", "reply", 1));
    assert.equal(missing.type, "RunNotFound");
    const badName = await refused(q.emitEvent("bad name!", 1));
    assert.equal(badName.type, "InvalidArgument");
    const badWait = await refused(q.getEvent("no-such-run", "status", -1));
    assert.equal(badWait.details.field, "timeout");
  });
});
