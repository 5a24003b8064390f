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
// running. The parent fills in [n, z]: n, the byte count of the core; z, 1
// when the core comes deflated, 0 when it comes as source. It sends: a 4-byte
// big-endian m, the core (n bytes), then m bytes of V8 code cache for it (m
// is 0 when none is sent; V8 ignores a cache made by another Node build).
//
// With no cache from the parent, the variant built for the
// Router's targetCodeCache (first-stage-cache.js: bootstrap/build.mjs
// leaves the <code-cache> part out of first-stage.js, so the default one
// stays under 1 KiB) looks for the cache in this account's cache
// directory (src/core/target-code-cache.ts writes it). V8 does not check a
// cache against tampering, so it is taken only from directories that are
// this account's alone, from the home (or XDG_CACHE_HOME) down, below
// directories no other account can change (each root's or this account's,
// writable by no one else unless sticky), by its physical path, and only a
// regular file of this account's, with one link, that no one else may
// write, opened without following a link and non-blocking (a FIFO cannot
// hang the start). Only net and vm are loaded here (fs for the cache, zlib
// for a deflated core): on a Node without its startup snapshot every
// built-in module costs the child's start.
(() => {
  const p = process;
  const r = require;
  if (p.versions.node.split('.')[0] < 12) {
    p.stderr.write('tendril: Node ' + p.version + ' at ' + p.execPath + ' is too old; Node 12 or newer is needed\n');
    p.exit(1);
  }
  const [n, z] = __TENDRIL_CORE__;
  const net = r('net');
  // writable: false keeps Node from shutting down this read-only pipe.
  const s = new net.Socket({ fd: 3, writable: false });
  const o = new net.Socket({ fd: 4, readable: false });
  o.write('tendril:1\n');
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
    // <code-cache> (in first-stage-cache.js only, for the Router's targetCodeCache: see bootstrap/build.mjs)
    else {
      const e = p.env;
      const xdg = e.XDG_CACHE_HOME;
      const root = xdg || e.HOME;
      if (root && root[0] === '/') {
        const dir = (xdg ? root : root + '/.cache') + '/tendril';
        let x = 0;
        for (const ch of p.execPath) x = (x * 31 + ch.charCodeAt(0)) | 0;
        // Where the core writes a cache if there is none or V8 turns this one down (vm.Script ignores the key).
        options.cacheFile =
          dir + '/core-__TENDRIL_CORE_KEY__-' + p.version + '-' + p.arch + '-' + (x >>> 0).toString(36) + '.v8';
        try {
          const f = r('fs');
          const k = f.constants;
          const u = p.geteuid();
          // This account's, and no one else may write it (18 is 0o022; a symlink, mode 0777, never is).
          const own = (st) => st.uid === u && (st.mode & 18) === 0;
          // The directory by its physical path, then each one above it up to /: root's or this account's,
          // and writable by no one else unless sticky (512 is 0o1000), so no other account can swap it.
          let a = f.realpathSync(dir);
          const c = a + options.cacheFile.slice(dir.length);
          let ok = own(f.lstatSync(a)) && (xdg || own(f.lstatSync(a.slice(0, a.lastIndexOf('/')))));
          while (ok && a.length > 1) {
            a = a.slice(0, a.lastIndexOf('/')) || '/';
            const st = f.lstatSync(a);
            ok = (st.uid === 0 || st.uid === u) && ((st.mode & 18) === 0 || (st.mode & 512) > 0);
          }
          // Then the file itself, not followed if it is a link.
          if (ok) {
            const d = f.openSync(c, k.O_RDONLY | k.O_NONBLOCK | k.O_NOFOLLOW);
            try {
              const st = f.fstatSync(d);
              if (st.isFile() && own(st) && st.nlink === 1 && st.size < 1 << 24) {
                const data = Buffer.alloc(st.size);
                if (f.readSync(d, data, 0, st.size, 0) === st.size) options.cachedData = data;
              }
            } finally {
              f.closeSync(d);
            }
          }
        } catch {
          // No cache yet, or not one to trust: the core is compiled from source and a new cache written.
        }
      }
    }
    // </code-cache>
    const source = (z ? r('zlib').inflateRawSync(core) : core) + '';
    const script = new (r('vm').Script)(source, options);
    // The core keeps the deflated bytes (to start children over a network), or the source as V8 already holds it.
    script
      .runInThisContext()(r)
      .boot(s, o, z ? core : source, z, r, script, options);
  };
  const onEnd = () => {
    p.stderr.write('tendril: stream closed after ' + got + ' bytes, before the ' + n + '-byte core had arrived\n');
    p.exit(1);
  };
  s.on('readable', onReadable);
  s.on('end', onEnd);
})();
