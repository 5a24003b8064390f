// The raw pipe echo's far end (see rawEcho in tendril.ts): reads
// length-prefixed messages on stdin and writes each back on stdout.
let pending: Buffer = Buffer.alloc(0);
process.stdin.on('data', (chunk: Buffer) => {
  pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
  while (pending.length >= 4) {
    const length = pending.readUInt32BE(0);
    if (pending.length < 4 + length) break;
    process.stdout.write(pending.subarray(0, 4 + length));
    pending = pending.subarray(4 + length);
  }
});
