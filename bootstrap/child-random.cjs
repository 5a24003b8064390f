// src/core/random.ts as children use it: node:crypto is loaded when the
// first handle is drawn, not while the child starts (see random.ts).
let randomFillSync;

exports.fillRandom = (array) => {
  if (!randomFillSync) randomFillSync = require('crypto').randomFillSync;
  randomFillSync(array);
};
