import { hostname, userInfo } from 'node:os';
import type { CommonOptions } from './bootstrap.js';
import { NotAllowedError, PasswordError } from './errors.js';
import type { Conversation, Reply, Session } from './method.js';

/** Options every method that becomes another account takes (sudo, su, doas). */
export interface BecomeOptions extends CommonOptions {
  /** Account to become. Default `'root'`. */
  username?: string;
  /** The password the tool asks for (whose it is depends on the tool); never on a command line. */
  password?: string;
}

/** The word "password" in the languages su and friends are commonly translated to, as alternatives of a regular expression. */
const PASSWORD_WORDS =
  "password|passwort|mot de passe|contraseña|senha|parola d'ordine|wachtwoord|lösenord|hasło|heslo|пароль|密码|密碼|パスワード|암호|비밀번호";

/**
 * "Password:" in the languages su and friends are commonly translated to,
 * ending the text: a password word, then on the same line and before any
 * other colon a colon, then only whitespace. Linear on any text: the run
 * between the word and the colon may hold no other password word, so each
 * character is scanned from one start at most, however often a target
 * repeats the word without a colon (the plain `word[^\n:]*:` was quadratic
 * there: 216 KB of it froze the event loop for seconds).
 */
export const PASSWORD_PROMPT = new RegExp(`(?:${PASSWORD_WORDS})(?:(?!${PASSWORD_WORDS})[^\\n:：])*[:：]\\s*$`, 'i');

/** Longest end of the output's last line a prompt is looked for in, in characters: a prompt is short. */
const PROMPT_LINE_CHARS = 1024;

/** Most characters of the output a refusal's error quotes, ending with the line the refusal is on. */
const REFUSAL_QUOTE_CHARS = 4096;

/**
 * What of `output` can end in a prompt: its last line once trailing
 * whitespace (blank lines too) is dropped, at most its last
 * `PROMPT_LINE_CHARS` characters. A prompt is at the end of what the tool
 * wrote, on its last line, so prompts are matched against this alone:
 * however much a target writes before one, looking for it costs no more.
 */
export function promptLine(output: string): string {
  const text = output.trimEnd();
  const start = text.lastIndexOf('\n') + 1;
  return text.slice(Math.max(start, text.length - PROMPT_LINE_CHARS));
}

/** The part of `output` a refusal's error quotes: up to the end of the line `found` is on, at most `REFUSAL_QUOTE_CHARS`. */
function quoteRefusal(output: string, found: RegExpExecArray): string {
  const newline = output.indexOf('\n', found.index + found[0].length);
  const end = newline === -1 ? output.length : newline;
  return output.slice(Math.max(0, end - REFUSAL_QUOTE_CHARS), end);
}

/** A refusal the tool may print, and the error it becomes. */
export interface Refusal {
  /**
   * Matches the refusal anywhere in the output (at most the conversation's
   * bound and the latest chunk): it must be linear on hostile text.
   */
  pattern: RegExp;
  /** Builds the error from the output that shows the refusal (at most `REFUSAL_QUOTE_CHARS`, ending with its line). */
  error: (output: string) => NotAllowedError | PasswordError;
  /** Only counts once a password was answered (a rejection of it). */
  afterAnswer?: boolean;
}

/** How one tool asks for a password and says no. */
export interface PasswordDialog {
  /** Tool name for messages, e.g. `'sudo'`. */
  tool: string;
  /** The account becoming another, e.g. `'deploy'`. */
  from: string;
  /** The account to become. */
  to: string;
  /** The password to answer with, if one was given. */
  password: string | undefined;
  /** Matches the tool's prompt at the end of its output; tested on `promptLine(output)` only, and linear on any text. */
  prompt: RegExp;
  /** Refusals, checked before prompts. */
  refusals: Refusal[];
  /** Name of the context being started. */
  contextName: string;
}

/** This context's account and host, as the tools see them. */
export function localAccount(): { user: string; host: string } {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = String(process.getuid?.() ?? 'unknown');
  }
  return { user, host: hostname() };
}

/**
 * Answers a tool's password prompt once. A second prompt means the
 * password was wrong, and a prompt without a password to give is an error
 * at once: both are a `PasswordError` immediately, never a timeout. The
 * password itself never appears in any message. Refusals are looked for
 * in all of the output it is given, the prompt only at its end
 * (`promptLine`).
 */
export function passwordConversation(dialog: PasswordDialog): Conversation {
  const { host } = localAccount();
  let asked = 0;
  const who = `${dialog.tool} from ${dialog.from} to ${dialog.to} on ${host}`;
  return {
    respond(output: string): Reply | undefined {
      for (const refusal of dialog.refusals) {
        if (refusal.afterAnswer && asked === 0) continue;
        const found = refusal.pattern.exec(output);
        if (found) return { error: refusal.error(quoteRefusal(output, found)) };
      }
      if (!dialog.prompt.test(promptLine(output))) return undefined;
      asked++;
      if (dialog.password === undefined) {
        return {
          error: new PasswordError(
            dialog.contextName,
            `${who} asked for a password and none was given (option password)`,
          ),
        };
      }
      if (asked > 1) return { error: new PasswordError(dialog.contextName, `wrong password for ${who}`) };
      return { answer: dialog.password };
    },
  };
}

/** The account a become method switches to: `options.username`, or root. */
export function targetAccount(options: BecomeOptions): string {
  return options.username ?? 'root';
}

/** Who is becoming whom, for a method's refusals. */
export interface Becoming {
  /** This context's account. */
  from: string;
  /** The account to become. */
  to: string;
  /** Name of the context being started. */
  contextName: string;
}

/**
 * The conversation of a become method (sudo, su, doas): this context's
 * account becoming `options.username`, answering `prompt` with
 * `options.password`, and recognising the tool's `refusals`.
 */
export function becomeConversation(
  tool: string,
  options: BecomeOptions,
  session: Session,
  prompt: RegExp,
  refusals: (who: Becoming) => Refusal[],
): Conversation {
  const who: Becoming = { from: localAccount().user, to: targetAccount(options), contextName: session.name };
  return passwordConversation({ tool, ...who, password: options.password, prompt, refusals: refusals(who) });
}

/** A refusal of a wrong password, recognised by `pattern` after the password was answered. */
export function wrongPassword(contextName: string, tool: string, from: string, to: string, pattern: RegExp): Refusal {
  return {
    pattern,
    afterAnswer: true,
    error: () =>
      new PasswordError(contextName, `wrong password for ${tool} from ${from} to ${to} on ${localAccount().host}`),
  };
}

/** A NotAllowedError naming who may not become whom, and the remedy. */
export function notAllowed(contextName: string, what: string): (output: string) => NotAllowedError {
  return (output) => new NotAllowedError(contextName, what, output);
}
