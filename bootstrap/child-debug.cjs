// `debug` as children use it: the library's namespace matching and
// formatting, without its terminal probing (tty, supports-color), which
// costs start-up time and means nothing there. Lines go to stderr, which
// the parent turns into log records; namespaces come from the BOOT
// configuration, never from the child's own environment.
const util = require('util');
const setup = require('debug/src/common.js');

const createDebug = setup({
  init(debug) {
    debug.inspectOpts = {};
  },
  log(...args) {
    process.stderr.write(`${util.format(...args)}\n`);
  },
  formatArgs(args) {
    args[0] = `${this.namespace} ${args[0]}`;
  },
  save() {},
  load() {
    return '';
  },
  useColors() {
    return false;
  },
  colors: [0],
});
createDebug.formatters.o = (value) => util.inspect(value, { breakLength: Number.POSITIVE_INFINITY });
createDebug.formatters.O = (value) => util.inspect(value);

module.exports = createDebug;
