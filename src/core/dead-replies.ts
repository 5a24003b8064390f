import { decode } from './codec.js';
import type { Message } from './message.js';

/** The reason carried by a dead reply. */
export function deadReason(message: Message): string {
  try {
    const reason = decode(message.data);
    return typeof reason === 'string' ? reason : 'message could not be delivered';
  } catch {
    return 'message could not be delivered';
  }
}
