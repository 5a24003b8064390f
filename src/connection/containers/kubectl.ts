/**
 * `kubectl`: a context in a container of a Kubernetes pod, through
 * `kubectl exec -i` (stdin passed through, no terminal on the data path).
 */
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import { BootstrapError, ContainerNotFoundError, ContainerNotRunningError, NotAllowedError } from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames, strings } from '../method-options.js';
import { targetName } from '../naming.js';
import { failure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** Options of the `kubectl` method. */
export interface KubectlOptions extends CommonOptions {
  /** The pod (`exec -i POD`). */
  pod: string;
  /** The container in the pod (`-c`). Default: the pod's default container. */
  container?: string;
  /** The namespace (`--namespace`). Default: the kubeconfig context's. */
  namespace?: string;
  /** The kubeconfig context (`--context`). Default: the current one. */
  context?: string;
  /** The kubeconfig file (`--kubeconfig`). Default: kubectl's (`$KUBECONFIG`, `~/.kube/config`). */
  kubeconfig?: string;
  /** Further global options, before `exec` (e.g. `['--request-timeout', '10s']`). */
  kubectlArgs?: string[];
  /** The kubectl command. Default `'kubectl'`. */
  kubectlPath?: string;
}

/**
 * `kubectl`: runs the child with `kubectl [--kubeconfig K] [--context C]
 * [--namespace N] [kubectlArgs] exec -i POD [-c CONTAINER] -- ...` on the
 * machine of the context starting it. kubectl's complaints become:
 * `ContainerNotFoundError` (no such pod, or no such container in it),
 * `ContainerNotRunningError` (the pod is not scheduled yet or has
 * completed, or the kubelet has no running container of that name:
 * starting, crash-looping), `NotAllowedError` (the API server's Forbidden:
 * no pods/exec permission), `InterpreterError` (no `sh` or Node in the
 * container), `ToolNotFoundError` (no kubectl), and `BootstrapError`
 * quoting kubectl for the rest (an unknown kubeconfig context, a missing
 * kubeconfig, an API server that cannot be reached).
 */
export const kubectl: ConnectionMethod<KubectlOptions> = toolMethod<KubectlOptions>({
  name: 'kubectl',
  optionNames: optionNames<KubectlOptions>({
    ...COMMON_OPTIONS,
    pod: true,
    container: true,
    namespace: true,
    context: true,
    kubeconfig: true,
    kubectlArgs: true,
    kubectlPath: true,
  }),
  checkOptions(options, where) {
    plainName(options.pod, 'pod', where, 'a pod');
    if (options.container !== undefined) plainName(options.container, 'container', where, 'a container of the pod');
    text(options.namespace, 'namespace', where, undefined);
    text(options.context, 'context', where, undefined);
    text(options.kubeconfig, 'kubeconfig', where, undefined, 4096);
    strings(options.kubectlArgs, 'kubectlArgs', where);
    text(options.kubectlPath, 'kubectlPath', where, undefined, 4096);
  },
  tool: (options) => options.kubectlPath ?? 'kubectl',
  toolOption: 'kubectlPath',
  install: "kubectl (Kubernetes release binaries, or your distribution's kubernetes-client package)",
  command: (options, argv) => [
    ...(options.kubeconfig === undefined ? [] : ['--kubeconfig', options.kubeconfig]),
    ...(options.context === undefined ? [] : ['--context', options.context]),
    ...(options.namespace === undefined ? [] : ['--namespace', options.namespace]),
    ...(options.kubectlArgs ?? []),
    'exec',
    '-i',
    options.pod,
    ...(options.container === undefined ? [] : ['-c', options.container]),
    '--',
    ...argv,
  ],
  step: (options, machine) => `starting ${targetName('kubectl', options)} with kubectl exec on ${machine}`,
  failures: (options, machine) => {
    const pod = `pod '${options.pod}'${options.namespace === undefined ? '' : ` in namespace '${options.namespace}'`}`;
    const container =
      options.container === undefined
        ? `the default container of ${pod}`
        : `container '${options.container}' of ${pod}`;
    const cluster = options.context === undefined ? "the kubeconfig's current context" : `context '${options.context}'`;
    return [
      // kubectl's own words for what the API server answered (its Status reason and message), then the kubelet's.
      failure(
        /Error from server \(NotFound\): pods "[^"]*" not found|unable to upgrade connection: pod does not exist/,
        ContainerNotFoundError,
        `no ${pod} in the cluster of ${cluster} (kubectl get pods lists them)`,
      ),
      failure(
        /container \S+ is not valid for pod/,
        ContainerNotFoundError,
        `${pod} has no container '${options.container}' (kubectl describe pod ${options.pod} lists them)`,
      ),
      // The kubelet has no running container of that name: not started yet, crash-looping, or exited.
      failure(
        /unable to upgrade connection: container not found|cannot exec into a container in a completed pod|does not have a host assigned|container is not created or running/,
        ContainerNotRunningError,
        `${container} is not running (kubectl describe pod ${options.pod} says why)`,
      ),
      failure(
        /Error from server \(Forbidden\)|error: You must be logged in|Unauthorized/,
        NotAllowedError,
        `the kubeconfig user of ${cluster} may not exec into ${pod}: it needs get on pods and create on pods/exec (kubectl auth can-i create pods/exec)`,
      ),
      failure(
        /context was not found for specified context/,
        BootstrapError,
        `the kubeconfig kubectl reads on ${machine} has no context '${options.context}' (kubectl config get-contexts lists them)`,
      ),
      failure(
        /^error: stat .*: no such file or directory$/m,
        BootstrapError,
        `the kubeconfig ${options.kubeconfig === undefined ? 'that $KUBECONFIG names' : `'${options.kubeconfig}'`} does not exist on ${machine}`,
      ),
      failure(
        // The server is host:port: `\S+`, not `.*`, which was quadratic on a line repeating the message.
        /The connection to the server \S+ was refused|Unable to connect to the server|no configuration has been provided/,
        BootstrapError,
        `kubectl on ${machine} could not reach the API server of ${cluster}: check the kubeconfig and that the cluster is up`,
      ),
      noShell(container, machine),
    ];
  },
});
