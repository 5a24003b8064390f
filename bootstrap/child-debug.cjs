// `debug` as children use it: the library's namespace matching and
// formatting, without its terminal probing (tty, supports-color), which
// costs start-up time and means nothing there. Lines go to stderr, which
// the parent turns into log records; namespaces come from the BOOT
// configuration, never from the child's own environment.
// util only once a namespace is enabled and a line is written.
let util;
const lazyUtil = () => {
  if (!util) util = require('util');
  return util;
};
const setup = require('debug/src/common.js');

const createDebug = setup({
  init(debug) {
    debug.inspectOpts = {};
  },
  log(...args) {
    process.stderr.write(`${lazyUtil().format(...args)}\n`);
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
createDebug.formatters.o = (value) => lazyUtil().inspect(value, { breakLength: Number.POSITIVE_INFINITY });
createDebug.formatters.O = (value) => lazyUtil().inspect(value);

module.exports = createDebug;
