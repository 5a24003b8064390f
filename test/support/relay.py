#!/usr/bin/env python3
"""A hostile channel between a parent and the command it starts.

Runs COMMAND with its stdin and stdout on fresh pipes and copies bytes
between those pipes and this process's own stdin and stdout, so the
command sees a channel with properties a test chooses:

  --chunk N        deliver input in writes of at most N bytes (1: a byte at a time)
  --pipe-size N    shrink both pipes to N bytes with F_SETPIPE_SZ
  --nonblock       make the command's ends of the pipes O_NONBLOCK
  --close-after N  deliver only the first N bytes of input, then close the
                   command's stdin
  --swallow        deliver nothing, ever (the command never hears from us)

The command's stderr is this process's stderr. Exits with the command's
status once it has exited.
"""
import argparse
import fcntl
import os
import signal
import subprocess
import sys
import threading


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chunk', type=int, default=65536)
    parser.add_argument('--pipe-size', type=int, default=0)
    parser.add_argument('--nonblock', action='store_true')
    parser.add_argument('--close-after', type=int, default=-1)
    parser.add_argument('--swallow', action='store_true')
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ['--'] else args.command

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    if args.pipe_size:
        for fd in (in_write, out_write):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, args.pipe_size)
            assert fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) == args.pipe_size
    if args.nonblock:
        for fd in (in_read, out_write):
            os.set_blocking(fd, False)
    child = subprocess.Popen(command, stdin=in_read, stdout=out_write)
    # Being told to stop means the command should stop too.
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    os.close(in_read)
    os.close(out_write)

    def pump_in():
        delivered = 0
        try:
            while True:
                data = os.read(0, 65536)
                if not data:
                    break
                if args.swallow:
                    continue
                if args.close_after >= 0:
                    data = data[: max(0, args.close_after - delivered)]
                for i in range(0, len(data), args.chunk):
                    os.write(in_write, data[i : i + args.chunk])
                delivered += len(data)
                if 0 <= args.close_after <= delivered:
                    break
        except OSError:
            pass
        if not args.swallow:
            os.close(in_write)

    def pump_out():
        try:
            while True:
                data = os.read(out_read, 65536)
                if not data:
                    break
                os.write(1, data)
        except OSError:
            pass

    threading.Thread(target=pump_in, daemon=True).start()
    reader = threading.Thread(target=pump_out, daemon=True)
    reader.start()
    status = child.wait()
    reader.join(1)
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == '__main__':
    main()
