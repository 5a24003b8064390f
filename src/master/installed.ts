import { bootstrapDir } from './assets.js';

// Evaluated first when tendril is imported (see index.ts): inside an
// application bundle tendril's files are not beside its code, and saying so
// now beats a failure in whichever bundled dependency happens to run first.
bootstrapDir();
