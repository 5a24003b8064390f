import { addExtension } from 'msgpackr';
import { DecodeError } from '../errors.js';
import { MAP_EXTENSION } from './extension-types.js';

/** Private carrier for a Map's entries; only the codec creates it, so user classes are never affected. */
export class WireMap {
  /** The Map's keys and values, alternating, each prepared. */
  readonly entries: unknown[];
  /** @param entries the Map's keys and values, alternating, each prepared. */
  constructor(entries: unknown[]) {
    this.entries = entries;
  }
}

addExtension({
  Class: WireMap,
  type: MAP_EXTENSION,
  write: (map: WireMap) => map.entries,
  read: (entries: unknown) => {
    if (!Array.isArray(entries) || entries.length % 2 !== 0) {
      throw new DecodeError('malformed Map: expected an array of keys and values');
    }
    const map = new Map();
    for (let i = 0; i < entries.length; i += 2) map.set(entries[i], entries[i + 1]);
    return map;
  },
});
