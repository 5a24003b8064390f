// The test image with Python 3 added, so Mitogen (whose children are
// Python) can enter the same containers as tendril: the containers bench
// (bench/containers.ts) runs both in one container of this image. Built
// once from the test image (apt-get install python3 in a container with
// the host's network, from the archive the image's sources.list names),
// saved with `podman save` beside the test image's tarball in
// .cache/images/, and loaded into each bench's own Podman store and
// Docker daemon (about 3 s). Runtimes that take no such archive (LXC,
// LXD, Incus: their containers are of the test image) get its top layer,
// Python and what it needs, unpacked into a running container.
import { execFileSync } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CONTAINER_LIMITS, nodeImageTarball, type PodmanBed } from '../../test/support/containers.js';
import { run } from './processes.js';

/** The image's name in the bed's store. */
export const PYTHON_IMAGE = 'localhost/tendril-bench-python:latest';

/** The image in a bench's Podman store, and the cached docker-archive it was loaded from (for `docker load`, addPythonLayer). */
export interface PythonImage {
  image: string;
  archive: string;
}

/**
 * Loads the image into `bed`'s store, building and caching it first when
 * the cache has none for the current test image (the cached archive is
 * named after the test image's tarball, so a new recipe rebuilds it).
 * @throws Error quoting podman or apt-get when the image cannot be built or loaded.
 */
export function loadPythonImage(bed: PodmanBed): PythonImage {
  const base = nodeImageTarball();
  const archive = join(dirname(base), `${basename(base, '.tar')}-python3.tar`);
  if (existsSync(archive)) {
    bed.podman(['load', '--quiet', '--input', archive]);
    return { image: PYTHON_IMAGE, archive };
  }
  const builder = `tendril-bench-python-build-${process.pid}`;
  // Written beside its final name and renamed: another run building it at the same time never reads half a file.
  const partial = `${archive}.${process.pid}.partial`;
  try {
    bed.podman([
      'run',
      '--name',
      builder,
      '--network',
      'host',
      ...CONTAINER_LIMITS,
      bed.image,
      'sh',
      '-c',
      'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*',
    ]);
    bed.podman(['commit', '--quiet', builder, PYTHON_IMAGE]);
    bed.podman(['save', '--quiet', '--format', 'docker-archive', '--output', partial, PYTHON_IMAGE]);
    renameSync(partial, archive);
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`the bench's Python image could not be built: ${stderr || (error as Error).message}`);
  } finally {
    rmSync(partial, { force: true });
    bed.podman(['rm', '--force', '--ignore', builder]);
  }
  return { image: PYTHON_IMAGE, archive };
}

/**
 * Unpacks the image's top layer (python3 and what it needs, over the test
 * image) into a running container of the test image: `exec` is the
 * runtime's start of a program in it, the argv before the program
 * (`lxc-attach ... --`), run with `env`; it runs `tar -x -C /` reading
 * the layer on stdin. Whiteouts (a layer's record of files it removed)
 * are left out.
 * @throws Error quoting tar or the runtime when it fails.
 */
export async function addPythonLayer(
  image: PythonImage,
  exec: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const manifest = JSON.parse(execFileSync('tar', ['-xOf', image.archive, 'manifest.json'], { encoding: 'utf8' })) as {
    Layers?: string[];
  }[];
  const top = manifest[0]?.Layers?.at(-1);
  if (top === undefined) throw new Error(`${image.archive} names no layer in its manifest.json`);
  const untar = [...exec, 'tar', '-x', '-C', '/', '--exclude=.wh.*'];
  const pipe = 'archive=$1 layer=$2; shift 2; tar -xOf "$archive" "$layer" | "$@"';
  try {
    await run('sh', ['-c', pipe, 'sh', image.archive, top, ...untar], env);
  } catch (error) {
    throw new Error(`python3 could not be added with ${exec.join(' ')}: ${(error as Error).message}`);
  }
}
