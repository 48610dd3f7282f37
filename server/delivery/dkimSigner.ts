// DKIM signatures, made by nodemailer (its documented `dkim` option, on a stream transport that hands
// the signed message back) on threads of their own. The signature is made synchronously, which would
// cost the delivery thread about as much again as building and sending a small message; on threads
// of their own they run beside delivery, on the other core. Each thread keeps one transport per key,
// given the key parsed once (a KeyObject, which node's signer takes as it takes a PEM): parsing a PEM
// key costs more than the signature. Messages are signed once, whatever number of recipients' copies
// go out.
//
// The thread's code is given as text (`eval`): a file of its own would need a path that holds both in
// the source tree, as tests run it, and in the bundle under build/. It loads nodemailer from where
// this module resolves it.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { DkimKey } from './message.ts';

const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const { createPrivateKey } = require('node:crypto');
const { constants, setPriority } = require('node:os');
const nodemailer = require(workerData.nodemailer);
// Below the delivery thread: on Linux a thread's nice value is its own, and signatures are wanted
// only as fast as that thread can send them; on a busy machine it keeps its core.
try {
  setPriority(0, constants.priority.PRIORITY_BELOW_NORMAL);
} catch {}
const transports = new Map();
const transportOf = ({ domainName, keySelector, privateKey, headerFieldNames }) => {
  const known = domainName + ' ' + keySelector + ' ' + privateKey;
  let transport = transports.get(known);
  if (!transport) {
    if (transports.size >= 1000) transports.clear();
    const dkim = { domainName, keySelector, privateKey: createPrivateKey(privateKey), headerFieldNames };
    transport = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim });
    transports.set(known, transport);
  }
  return transport;
};
parentPort.on('message', ({ id, raw, dkim, envelope }) => {
  Promise.resolve()
    .then(() => transportOf(dkim).sendMail({ raw: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), envelope }))
    .then(
      (info) => parentPort.postMessage({ id, signed: info.message }),
      (error) => parentPort.postMessage({ id, error: String((error && error.message) || error) }),
    );
});
`;

type Waiting = { thread: Worker; resolve: (signed: Buffer) => void; reject: (error: Error) => void };

/**
 * Signing threads per signer, taking messages in turn: nodemailer reads the message through streams
 * as well as signing it, and one thread could not keep up with one delivery thread.
 */
const THREADS = 2;

export class DkimSigner {
  private readonly threads: (Worker | undefined)[] = Array(THREADS).fill(undefined);
  private next = 0;
  private readonly waiting = new Map<number, Waiting>();

  /** The message with its DKIM-Signature header first. */
  sign(raw: Buffer, key: DkimKey): Promise<Buffer> {
    const id = this.next++;
    const turn = id % THREADS;
    const thread = (this.threads[turn] ??= this.start(turn));
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { thread, resolve, reject });
      // The transport wants an envelope; the message's own is the delivery's, not this one's.
      thread.postMessage({ id, raw, dkim: key, envelope: { from: '', to: ['signing@localhost'] } });
    });
  }

  async close(): Promise<void> {
    const threads = this.threads.splice(0, THREADS, ...Array(THREADS).fill(undefined));
    await Promise.all(threads.map((thread) => thread?.terminate()));
  }

  private start(turn: number): Worker {
    const thread = new Worker(THREAD, { eval: true, workerData: { nodemailer: createRequire(import.meta.url).resolve('nodemailer') } });
    // Waiting sends keep the process busy; an idle signer must not keep it alive.
    thread.unref();
    thread.on('message', ({ id, signed, error }: { id: number; signed?: Uint8Array; error?: string }) => {
      const waiting = this.waiting.get(id);
      this.waiting.delete(id);
      if (error !== undefined || !signed) waiting?.reject(new Error(`the message could not be signed: ${error}`));
      else waiting?.resolve(Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength));
    });
    // A thread that died fails what it held (those sends are tried again later); the next message in
    // its turn starts another.
    const failAll = (error: Error) => {
      if (this.threads[turn] === thread) this.threads[turn] = undefined;
      for (const [id, waiting] of this.waiting) {
        if (waiting.thread !== thread) continue;
        waiting.reject(error);
        this.waiting.delete(id);
      }
    };
    thread.on('error', failAll);
    thread.on('exit', () => failAll(new Error('the DKIM signing thread stopped')));
    return thread;
  }
}
