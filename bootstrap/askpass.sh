#!/bin/sh
# SSH_ASKPASS helper of tendril's openssh connection method. ssh runs it with
# its prompt as $1; it asks the master's one-time socket for the matching
# secret and prints it. The secret is never on any command line or disk.
exec "$TENDRIL_ASKPASS_NODE" -e 'const s = require("net").connect(process.env.TENDRIL_ASKPASS_SOCKET); s.end(process.argv[1] || ""); s.pipe(process.stdout);' "$1"
