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

/** `kubectl`: runs the child with `kubectl [args] exec -i POD [-c C] -- ...`. */
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
    options.kubectlPath ?? 'kubectl',
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
    return [
      failure(/pods? "[^"]*" not found|NotFound/, ContainerNotFoundError, `no ${pod} (kubectl get pods lists them)`),
      failure(
        /container [^ ]+ is not valid for pod|container not found/i,
        ContainerNotFoundError,
        `${pod} has no container '${options.container}'`,
      ),
      failure(
        /cannot exec into a container in a completed pod|container not running|is not running|does not have a host assigned|ContainerCreating/i,
        ContainerNotRunningError,
        `the container of ${pod} is not running`,
      ),
      failure(
        /Forbidden|Unauthorized|You must be logged in/i,
        NotAllowedError,
        `the kubeconfig user may not exec into ${pod}: it needs the pods/exec permission (kubectl auth can-i create pods/exec)`,
      ),
      failure(
        /Unable to connect to the server|connection to the server .* was refused|no configuration has been provided|context was not found/i,
        BootstrapError,
        `kubectl on ${machine} could not reach a cluster: check kubeconfig and context`,
      ),
      noShell(`the container of ${pod}`, machine),
    ];
  },
});
