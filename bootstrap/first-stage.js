// The first stage: the program given to `node -e` on the target. It must
// stay small (it travels on the command line), run on every supported Node
// (12 and newer), and make no assumption about how the stream delivers bytes:
// one byte at a time, a 4 KiB pipe and a non-blocking descriptor all work
// because it reads through a net.Socket in paused mode and takes exactly
// the bytes it was told of with read(n), leaving anything after them
// buffered for the core.
//
// fd 3 is the stream from the parent; fd 4 the stream to it (see
// src/connection/first-stage.ts). The parent fills in n, the byte count of
// the deflated core, and sends: a 4-byte big-endian m, the core (n bytes),
// then m bytes of V8 code cache for the core (m is 0 when none is sent; V8
// ignores a cache made by another Node version).
const n = __TENDRIL_CORE_SIZE__;
const s = new (require('net').Socket)({ fd: 3, readable: true, writable: false });
let m = -1;
let got = 0;
const onReadable = () => {
  if (m < 0) {
    const h = s.read(4);
    if (h === null || h.length < 4) {
      // At end of stream read() hands over a short remainder; 'end' follows.
      got = h === null ? s.readableLength : h.length;
      return;
    }
    m = h.readUInt32BE(0);
  }
  const b = s.read(n + m);
  if (b === null || b.length < n + m) {
    got = 4 + (b === null ? s.readableLength : b.length);
    return;
  }
  s.removeListener('readable', onReadable);
  s.removeListener('end', onEnd);
  const core = b.slice(0, n);
  const options = { filename: 'tendril:core' };
  if (m) options.cachedData = b.slice(n);
  new (require('vm').Script)(require('zlib').inflateRawSync(core).toString(), options)
    .runInThisContext()(require)
    .boot(s, core, require);
};
const onEnd = () => {
  process.stderr.write(`tendril: stream closed after ${got} bytes, before the ${n}-byte core had arrived\n`);
  process.exit(1);
};
s.on('readable', onReadable);
s.on('end', onEnd);
