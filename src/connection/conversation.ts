/**
 * The exchange with a target before the stream exists: its stderr may ask
 * for a password (sudo, su, doas, OpenSSH) and its stdout ends the exchange
 * with the first stage's hello. The core is held back until that hello
 * when a method may prompt, so a prompt can never read it as a password.
 */
import { StringDecoder } from 'node:string_decoder';
import { HELLO } from './first-stage.js';
import type { Conversation, Session, Transport } from './method.js';
import { MAX_SHIP_REQUEST } from './runtime-shipping.js';
import { SHIP_REQUEST } from './ship-stage.js';

/** Most bytes of the target's stdout kept while waiting for the hello: the end of what it wrote there. */
const EARLY_OUTPUT_BYTES = 4096;

/**
 * Most characters of the target's stderr a conversation keeps from one
 * chunk to the next (since its last answer), in UTF-16 code units. Each
 * chunk is looked at with what is kept before it, so a prompt or refusal
 * split across chunks is still seen; a target writing without end makes
 * nothing grow, and no chunk costs more to look at than this and itself.
 */
const CONVERSATION_CHARS = 8192;

/** Put where kept text was cut: what follows is not the start of a line (a refusal anchored at one cannot match there). */
const CUT = '…';

/**
 * What the target wrote on its stdout before the hello: not tendril's, but
 * the program's in between (`docker exec` prints the OCI runtime's
 * complaint there, not on stderr), quoted with its stderr when the start
 * fails. At most the last `EARLY_OUTPUT_BYTES`: a target writing without
 * end makes nothing grow.
 */
export interface EarlyOutput {
  /** The last bytes written on stdout before the hello (empty until some arrive), at most `EARLY_OUTPUT_BYTES`. */
  bytes: Buffer;
}

/**
 * Waits for the first stage's hello on the target's stdout, answering
 * prompts meanwhile; sends the core once it may. Resolves with bytes that
 * followed the hello (the start of the child's first message).
 * @param conversation the method's answers to prompts; undefined when it never prompts (the core went out already).
 * @param sendCore writes the core unless it went out already; called on the hello.
 * @param early receives what came before the hello, while no hello has come.
 * @param onShip called with the line of a shell asking for a Node runtime
 *   (ship-stage.ts), without its newline, once; the hello follows after it.
 * @returns a promise that rejects with the conversation's error (a refusal,
 *   a wrong or missing password), or with `onShip`'s.
 */
export function converse(
  transport: Transport,
  conversation: Conversation | undefined,
  sendCore: () => void,
  session: Session,
  early: EarlyOutput,
  onShip?: (line: string) => Promise<void>,
): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    // What the target wrote since the last answer, at most CONVERSATION_CHARS of its end.
    let seen = '';
    // A character split across chunks is decoded whole ("пароль" must not become U+FFFD halves).
    const decoder = new StringDecoder('utf8');
    const onPrompt = (chunk: Buffer) => {
      const output = seen + decoder.write(chunk);
      const reply = conversation?.respond(output);
      if (!reply) {
        seen = lastChars(output, CONVERSATION_CHARS);
        return;
      }
      if ('error' in reply) {
        finish();
        reject(reply.error);
        return;
      }
      seen = '';
      session.step = `waiting for Node to start after answering a password prompt (${transport.where})`;
      (transport.promptInput ?? transport.stdin).write(`${reply.answer}\n`);
    };
    let received = Buffer.alloc(0);
    let asked = false;
    // The runtime being sent: the hello of the Node it starts may come before the send has ended.
    let shipping: Promise<void> | undefined;
    const onOutput = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (onShip && !asked) {
        const request = received.indexOf(SHIP_REQUEST);
        const end = request === -1 ? -1 : received.indexOf(10, request);
        if (end !== -1 || (request !== -1 && received.length - request > MAX_SHIP_REQUEST)) {
          asked = true;
          // A line too long to be one is passed on cut, and refused as malformed.
          const line = received.subarray(request, end === -1 ? request + MAX_SHIP_REQUEST + 1 : end).toString('latin1');
          received = received.subarray(end === -1 ? received.length : end + 1);
          shipping = onShip(line);
          shipping.catch((error: unknown) => {
            finish();
            reject(error);
          });
        }
      }
      const at = received.indexOf(HELLO);
      if (at === -1) {
        // The tail is kept whole: it holds at least the start of a hello split across chunks.
        if (received.length > EARLY_OUTPUT_BYTES) received = received.subarray(received.length - EARLY_OUTPUT_BYTES);
        early.bytes = received;
        return;
      }
      finish();
      const rest = received.subarray(at + HELLO.length);
      const go = () => {
        // Sent at once already unless the method may prompt, or sent after a runtime (then it does nothing here).
        sendCore();
        resolve(rest);
      };
      // After a runtime, nothing more may go out (the BOOT message) before the core that follows it.
      if (shipping) shipping.then(go, () => {});
      else go();
    };
    const finish = () => {
      transport.stderr.off('data', onPrompt);
      transport.stdout.off('data', onOutput);
    };
    if (conversation) transport.stderr.on('data', onPrompt);
    transport.stdout.on('data', onOutput);
  });
}

/**
 * The end of `text`, at most `max` characters: from the first line that
 * starts in it, or marked as cut (`CUT`) when it is all one line.
 */
function lastChars(text: string, max: number): string {
  if (text.length <= max) return text;
  const from = text.length - max;
  const newline = text.indexOf('\n', from - 1);
  return newline === -1 ? CUT + text.slice(from) : text.slice(newline + 1);
}
