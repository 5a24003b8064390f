import type { Queue, QueueAddOptions } from 'p-queue';

/** A queued call, as p-queue hands it over. */
type RunFunction = () => Promise<unknown>;

/**
 * The waiting calls of a service, first in first out, for p-queue's
 * `queueClass` option. p-queue's own priority queue calls
 * `Array.prototype.at`, which a child on Node 12 to 16.5 lacks (esbuild
 * lowers syntax, not APIs); services need no priorities anyway.
 */
export class FifoQueue implements Queue<RunFunction, QueueAddOptions> {
  private runs: RunFunction[] = [];
  /** Index of the first live run: dequeued ones before it are dropped in batches, so a dequeue is O(1). */
  private head = 0;

  /** Adds a call at the end. */
  enqueue(run: RunFunction): void {
    this.runs.push(run);
  }

  /** Takes the call that has waited longest, if any. */
  dequeue(): RunFunction | undefined {
    if (this.head === this.runs.length) return undefined;
    const run = this.runs[this.head++];
    if (this.head === this.runs.length) {
      this.runs = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.runs.length) {
      this.runs = this.runs.slice(this.head);
      this.head = 0;
    }
    return run;
  }

  /** Every waiting run has the default priority. */
  filter(options: Readonly<Partial<QueueAddOptions>>): RunFunction[] {
    return (options.priority ?? 0) === 0 ? this.runs.slice(this.head) : [];
  }

  /** p-queue's `setPriority(id, priority)`: services give their calls no IDs or priorities. */
  setPriority(): void {
    throw new Error('service calls have no priorities');
  }

  /** Drops a waiting call (p-queue does when an aborted call leaves the queue). */
  remove(run: RunFunction | string): void {
    const index = this.runs.indexOf(run as RunFunction, this.head);
    if (index !== -1) this.runs.splice(index, 1);
  }

  /** Calls waiting. */
  get size(): number {
    return this.runs.length - this.head;
  }
}
