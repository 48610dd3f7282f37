// DKIM signatures, made by nodemailer's signer on a thread of their own. The signer makes its RSA
// signature synchronously, which would cost the delivery thread about as much again as building and
// sending a small message; on its own thread it runs beside delivery, on the other core. The thread
// writes each message out through nodemailer's stream transport with the `dkim` option, which is how
// nodemailer signs; a domain's key is parsed once there, since parsing a PEM key costs more than the
// signature. Messages are signed once, whatever number of recipients' copies go out.
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
const { createTransport } = require(workerData.nodemailer);
const writer = createTransport({ streamTransport: true, buffer: true });
const keys = new Map();
parentPort.on('message', ({ id, raw, dkim }) => {
  let privateKey = keys.get(dkim.privateKey);
  if (!privateKey) {
    if (keys.size >= 1000) keys.clear();
    privateKey = createPrivateKey(dkim.privateKey);
    keys.set(dkim.privateKey, privateKey);
  }
  writer.sendMail({ envelope: { from: '', to: ['signing@localhost'] }, raw: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), dkim: { ...dkim, privateKey } }).then(
    (info) => parentPort.postMessage({ id, signed: info.message }),
    (error) => parentPort.postMessage({ id, error: String((error && error.message) || error) }),
  );
});
`;

type Waiting = { resolve: (signed: Buffer) => void; reject: (error: Error) => void };

export class DkimSigner {
  private thread: Worker | undefined;
  private next = 0;
  private readonly waiting = new Map<number, Waiting>();

  /** The message with its DKIM-Signature header first. */
  sign(raw: Buffer, key: DkimKey): Promise<Buffer> {
    const thread = (this.thread ??= this.start());
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      thread.postMessage({ id, raw, dkim: key });
    });
  }

  async close(): Promise<void> {
    const thread = this.thread;
    this.thread = undefined;
    await thread?.terminate();
  }

  private start(): Worker {
    const thread = new Worker(THREAD, { eval: true, workerData: { nodemailer: createRequire(import.meta.url).resolve('nodemailer') } });
    // Waiting sends keep the process busy; an idle signer must not keep it alive.
    thread.unref();
    thread.on('message', ({ id, signed, error }: { id: number; signed?: Uint8Array; error?: string }) => {
      const waiting = this.waiting.get(id);
      this.waiting.delete(id);
      if (error !== undefined || !signed) waiting?.reject(new Error(`the message could not be signed: ${error}`));
      else waiting?.resolve(Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength));
    });
    // A thread that died fails what it held (those sends are tried again later); the next message starts another.
    const failAll = (error: Error) => {
      if (this.thread === thread) this.thread = undefined;
      for (const waiting of this.waiting.values()) waiting.reject(error);
      this.waiting.clear();
    };
    thread.on('error', failAll);
    thread.on('exit', () => failAll(new Error('the DKIM signing thread stopped')));
    return thread;
  }
}
