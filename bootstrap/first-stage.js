// The first stage: the program given to `node -e` on the target. It must
// stay small (it travels on the command line), run on every supported Node
// (12 and newer) and say so clearly on an older one, survive any login
// shell's quoting (so no `!` and no newline appear in its minified form),
// and make no assumption about how the stream delivers bytes: one byte at a
// time, a 4 KiB pipe and a non-blocking descriptor all work because it
// reads through a net.Socket in paused mode and takes exactly the bytes it
// was told of with read(n), leaving anything after them buffered for the core.
//
// fd 3 is the stream from the parent; fd 4 the stream to it (see
// src/connection/first-stage.ts). It first writes `tendril:1\n` on fd 4, so
// a parent that had to answer password prompts knows the interpreter is
// running. The parent fills in n, the byte count of the deflated core, and
// sends: a 4-byte big-endian m, the core (n bytes), then m bytes of V8 code
// cache for it (m is 0 when none is sent; V8 ignores a cache made by
// another Node version).
(() => {
  const p = process;
  const r = require;
  if (p.versions.node.split('.')[0] < 12) {
    p.stderr.write('tendril: Node ' + p.version + ' at ' + p.execPath + ' is too old; Node 12 or newer is needed\n');
    p.exit(1);
  }
  const n = __TENDRIL_CORE_SIZE__;
  // readable is the default; writable: false keeps Node from shutting down this read-only pipe.
  const s = new (r('net').Socket)({ fd: 3, writable: false });
  r('fs').writeSync(4, 'tendril:1\n');
  let m = -1;
  let got = 0;
  const onReadable = () => {
    if (m < 0) {
      const h = s.read(4);
      if (h === null || h.length < 4) {
        // At end of stream read() hands over a short remainder; 'end' follows.
        got = h ? h.length : s.readableLength;
        return;
      }
      m = h.readUInt32BE(0);
    }
    const b = s.read(n + m);
    if (b === null || b.length < n + m) {
      got = 4 + (b ? b.length : s.readableLength);
      return;
    }
    s.off('readable', onReadable);
    s.off('end', onEnd);
    const core = b.slice(0, n);
    const options = { filename: 'tendril:core' };
    if (m) options.cachedData = b.slice(n);
    new (r('vm').Script)(r('zlib').inflateRawSync(core) + '', options).runInThisContext()(r).boot(s, core, r);
  };
  const onEnd = () => {
    p.stderr.write('tendril: stream closed after ' + got + ' bytes, before the ' + n + '-byte core had arrived\n');
    p.exit(1);
  };
  s.on('readable', onReadable);
  s.on('end', onEnd);
})();
