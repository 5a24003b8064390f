"""Mitogen's side of tendril's benchmark (bench/index.ts), through its
public API only: router.local(), router.ssh(), router.sudo(via=...),
context.call() and FileService. Run with Debian's python3-mitogen:

    /usr/bin/python3 bench/peers/mitogen_bench.py MODE

MODE whole-local | whole-ssh | whole-sshsudo: one call, then exit (the
caller times the process). MODE serve: answers one JSON command per line
on stdin with one JSON line on stdout, so the bench can alternate with
tendril: {"op": "ready", "kind": K} times a new context of kind K (local,
ssh or sshsudo) answering one call; {"op": "rtt", "kind": K, "size": N,
"count": C} times C round trips with an N-byte argument; {"op": "cold",
"kind": "local", "count": C} times the first C round trips of a new local
context, and each side's CPU per call; {"op": "cpu", "kind": K, "count":
C} makes C empty calls and answers each side's CPU time per 10,000 calls,
in ms; {"op": "commands",
"kind": K, "count": C} times C subprocess.check_call(['true']) in it. The
container kinds (bench/containers.ts) come from the environment variable
BENCH_CONTAINERS (JSON: podman, buildah, docker, lxc_attach and lxd, the
paths of wrappers that point those tools at the bench's own stores and
daemons; container and work, a running container and a buildah working
container, image, the image for docker run; lxc_container and
lxd_container, the LXC container and the LXD instance): podman, buildah,
sudo-podman (a sudo context, then podman via it, both started),
held-sudo-podman (podman via one sudo context kept for the whole run),
docker, docker-image (docker run --rm), lxc, lxd, and setns-podman (the
setns method, its docker kind given podman as docker_path: podman inspect
answers docker's question alike); a container kind's failure is answered
as {"error": "..."}, and the driver carries on. MODE inproc: the other in-process
measurements, printed as one JSON object. MODE fanout N: N local
contexts started at once (one thread each, as Mitogen's API blocks per
start), one call each; prints wall time and peak RSS as JSON. MODE scale
MIDS PER: MIDS local contexts, PER local contexts via each (one thread per
intermediate, since each intermediate runs the starts it is asked for one
after another on its main thread), one call each, then one call to every
leaf at once (call_async on each, then mitogen.select); prints the wall
times, the master's RSS and open fds before and at the peak, and its
descendants' memory, as bench/scripts/scale.ts does for tendril. The SSH
target comes from the environment variable BENCH_SSH (JSON: host, port,
user, key, target, file).
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

import mitogen.core
import mitogen.select
import mitogen.service
import mitogen.utils

SSH = json.loads(os.environ.get('BENCH_SSH', '{}'))
SMOKE = os.environ.get('BENCH_SMOKE') == '1'
CONTAINERS = json.loads(os.environ.get('BENCH_CONTAINERS', '{}'))


def ssh(router, **kwargs):
    return router.ssh(hostname=SSH['host'], port=SSH['port'], username=SSH['user'], identity_file=SSH['key'],
                      check_host_keys='ignore', python_path='/usr/bin/python3', **kwargs)


def sudo(router, via):
    return router.sudo(via=via, username=SSH['target'], python_path='/usr/bin/python3')


def podman(router, via=None):
    return router.podman(container=CONTAINERS['container'], podman_path=CONTAINERS['podman'], via=via)


def container_chain(router, kind, shared):
    """The contexts a container kind starts, the one to call last."""
    if kind == 'podman':
        return [podman(router)]
    if kind == 'buildah':
        return [router.buildah(container=CONTAINERS['work'], buildah_path=CONTAINERS['buildah'])]
    if kind == 'sudo-podman':
        first = router.sudo(python_path='/usr/bin/python3')
        return [first, podman(router, via=first)]
    if kind == 'held-sudo-podman':
        if 'sudo' not in shared:
            shared['sudo'] = router.sudo(python_path='/usr/bin/python3')
        return [podman(router, via=shared['sudo'])]
    if kind == 'docker':
        return [router.docker(container=CONTAINERS['container'], docker_path=CONTAINERS['docker'])]
    if kind == 'docker-image':
        return [router.docker(image=CONTAINERS['image'], docker_path=CONTAINERS['docker'])]
    if kind == 'lxc':
        return [router.lxc(container=CONTAINERS['lxc_container'], lxc_attach_path=CONTAINERS['lxc_attach'])]
    if kind == 'lxd':
        # Its default python_path is 'python', which Debian 12 has not.
        return [router.lxd(container=CONTAINERS['lxd_container'], lxc_path=CONTAINERS['lxd'],
                           python_path='/usr/bin/python3')]
    if kind == 'setns-podman':
        return [router.setns(container=CONTAINERS['container'], kind='docker', docker_path=CONTAINERS['podman'],
                             python_path='/usr/bin/python3')]
    raise SystemExit('unknown kind ' + kind)


def echo(value):
    return value


def rss_kib():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def cpu_precise():
    # os.times() counts in clock ticks (10 ms): too coarse for a few hundred calls.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fetch(master, path, dest):
    with open(dest, 'wb') as out:
        ok, meta = mitogen.service.FileService.get(context=master, path=path, out_fp=out)
    size = os.path.getsize(dest)
    os.unlink(dest)
    return size


def ms(seconds):
    return seconds * 1000.0


def timed(fn, *args):
    started = time.perf_counter()
    fn(*args)
    return ms(time.perf_counter() - started)


def whole(router, mode):
    if mode == 'whole-local':
        target = router.local()
    elif mode == 'whole-ssh':
        target = ssh(router)
    else:
        target = sudo(router, ssh(router))
    target.call(os.getpid)


def inproc(router):
    out = {}
    targets = {'local': router.local()}
    targets['ssh'] = ssh(router)

    idle = router.local()
    time.sleep(0.5)
    out['idle-child-rss'] = [idle.call(rss_kib) * 1024]

    if SSH.get('file'):
        service = mitogen.service.FileService(router)
        pool = mitogen.service.Pool(router, services=[service])
        service.register(SSH['file'])
        for kind in ('local', 'ssh'):
            samples = []
            for _ in range(1 if SMOKE else 3):
                started = time.perf_counter()
                # Beside the file, in this run's scratch directory: another run's copy never collides with it.
                dest = os.path.join(os.path.dirname(SSH['file']), 'mitogen-copy-' + kind)
                size = targets[kind].call(fetch, router.myself(), SSH['file'], dest)
                samples.append(ms(time.perf_counter() - started))
            out['copy-' + kind] = samples
        pool.stop()
    print(json.dumps(out))


def empty_calls(context, count):
    """count empty calls, each timed (ms), and each side's CPU per call (us), as tendril's emptyCalls."""
    child0 = context.call(cpu_precise)
    master0 = cpu_precise()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        context.call(echo, None)
        samples.append(ms(time.perf_counter() - started))
    master = cpu_precise() - master0
    child = context.call(cpu_precise) - child0
    return {'samples': samples, 'master': master * 1e6 / count, 'child': child * 1e6 / count}


def cold(router, count):
    context = router.local()
    try:
        return empty_calls(context, count)
    finally:
        context.shutdown(wait=True)


def serve(router):
    held = {}
    shared = {}

    def start(kind):
        if kind == 'local':
            return [router.local()]
        if kind not in ('ssh', 'sshsudo'):
            return container_chain(router, kind, shared)
        first = ssh(router)
        return [first] if kind == 'ssh' else [first, sudo(router, first)]

    def answer(command):
        kind = command['kind']
        if command['op'] == 'ready':
            started = time.perf_counter()
            chain = start(kind)
            chain[-1].call(os.getpid)
            result = ms(time.perf_counter() - started)
            for context in reversed(chain):
                context.shutdown(wait=True)
            return result
        if command['op'] == 'cold':
            return cold(router, command['count'])
        if kind not in held:
            held[kind] = start(kind)[-1]
        context = held[kind]
        if command['op'] == 'cpu':
            calls = empty_calls(context, command['count'])
            # us per call to ms per 10,000 calls.
            return {'master': calls['master'] * 10, 'child': calls['child'] * 10}
        if command['op'] == 'commands':
            started = time.perf_counter()
            for _ in range(command['count']):
                context.call(subprocess.check_call, ['true'])
            return ms(time.perf_counter() - started)
        value = b'x' * command['size'] if command['size'] else None
        result = []
        for _ in range(command['count']):
            started = time.perf_counter()
            context.call(echo, value)
            result.append(ms(time.perf_counter() - started))
        return result

    for line in sys.stdin:
        command = json.loads(line)
        try:
            result = answer(command)
        except Exception as error:  # noqa: BLE001 - a container tool's failure is answered, the caller retries
            # The container kinds' tools (LXD's lxc exec) fail now and then; the others end the driver, as before.
            if command['kind'] in ('local', 'ssh', 'sshsudo'):
                raise
            result = {'error': '%s: %s' % (type(error).__name__, error)}
        sys.stdout.write(json.dumps(result) + '\n')
        sys.stdout.flush()


def peak_rss():
    # Not ru_maxrss: Linux carries it over an exec, so it would report the parent's.
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    return 0


def in_threads(calls):
    # Runs each call in a thread of its own, all at once (Mitogen's API
    # blocks on each start), and raises the first error any of them met.
    errors = []

    def run(call):
        try:
            call()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def fanout(router, n):
    started = time.perf_counter()
    in_threads([lambda: router.local().call(os.getpid)] * n)
    print(json.dumps({'wall': ms(time.perf_counter() - started), 'rss': peak_rss()}))


def status_bytes(field):
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    return float('nan')


def open_fds():
    # As tendril's side counts: the listing's own fd included.
    return len(os.listdir('/proc/self/fd'))


def fd_kinds():
    kinds = {}
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink('/proc/self/fd/' + fd)
        except OSError:
            continue  # the listing's own, closed by now
        kind = target.split(':', 1)[0] if ':' in target else ('file' if target.startswith('/') else 'other')
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def descendants_memory(root):
    """Count, summed RSS and summed PSS of every live process under root, from /proc."""
    children = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(')') + 2:].split(' ')[1])
        children.setdefault(ppid, []).append(int(name))
    total = {'count': 0, 'rss': 0, 'pss': 0}
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        queue.extend(children.get(pid, []))
        try:
            with open('/proc/%d/smaps_rollup' % pid) as f:
                for line in f:
                    if line.startswith('Rss:'):
                        total['rss'] += int(line.split()[1]) * 1024
                    elif line.startswith('Pss:'):
                        total['pss'] += int(line.split()[1]) * 1024
            total['count'] += 1
        except OSError:
            continue
    return total


def cpu_ms():
    # The whole process (the broker's thread included), user + system.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


def scale(router, mids, per):
    base_rss = status_bytes('VmRSS')
    base_fds = open_fds()
    base_fd_kinds = fd_kinds()
    cpu_before = cpu_ms()
    started = time.perf_counter()
    leaves = [[] for _ in range(mids)]

    def branch(i):
        mid = router.local()
        for _ in range(per):
            leaf = router.local(via=mid)
            leaf.call(os.getpid)
            leaves[i].append(leaf)

    in_threads([lambda i=i: branch(i) for i in range(mids)])
    start_ms = ms(time.perf_counter() - started)
    start_cpu = cpu_ms() - cpu_before
    everyone = [leaf for branch_leaves in leaves for leaf in branch_leaves]
    cpu_before = cpu_ms()
    started = time.perf_counter()
    pids = mitogen.select.Select.all([leaf.call_async(os.getpid) for leaf in everyone])
    fleet_ms = ms(time.perf_counter() - started)
    fleet_cpu = cpu_ms() - cpu_before
    if len(set(pids)) != mids * per:
        raise SystemExit('%d distinct processes answered, not %d' % (len(set(pids)), mids * per))
    children = descendants_memory(os.getpid())
    print(json.dumps({
        'startMs': start_ms, 'fleetMs': fleet_ms, 'startCpuMs': start_cpu, 'fleetCpuMs': fleet_cpu,
        'baseRss': base_rss, 'rss': status_bytes('VmRSS'), 'peakRss': peak_rss(),
        'baseFds': base_fds, 'baseFdKinds': base_fd_kinds, 'fds': open_fds(), 'children': children['count'],
        'childrenRss': children['rss'], 'childrenPss': children['pss'], 'fdKinds': fd_kinds(),
    }))


def main(router):
    mode = sys.argv[1]
    if mode.startswith('whole-'):
        whole(router, mode)
    elif mode == 'serve':
        serve(router)
    elif mode == 'inproc':
        inproc(router)
    elif mode == 'fanout':
        fanout(router, int(sys.argv[2]))
    elif mode == 'scale':
        scale(router, int(sys.argv[2]), int(sys.argv[3]))
    else:
        raise SystemExit('unknown mode ' + mode)


if __name__ == '__main__':
    mitogen.utils.run_with_router(main)
