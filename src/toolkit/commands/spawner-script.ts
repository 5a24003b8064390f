/**
 * The program of a context's command spawner (see spawner.ts), in Perl:
 * a small long-lived process that forks and execs commands for the
 * context, so they are forked from its few MiB rather than from Node's
 * whole address space, and relays their output under flow control.
 *
 * Started as `perl -e SCRIPT WINDOW`. Messages both ways are framed
 * `[u32 length][type byte][u32 id][body]`, big-endian, the length counting
 * from the type byte. Node sends `S` (start: NUL-separated umask, the
 * context's directory as /proc/PID/cwd and by name (a relative or no cwd
 * starts there), cwd or '', file, argument count, argv, then the
 * environment as NAME=value) and `A` (ack: u32 bytes of output taken). The spawner
 * answers `R` (ready, once), `P` (started: u32 pid), `E` (not started:
 * u32 errno), `O` (output: a byte 1 or 2, the stream, then the bytes) and
 * `X` (ended: u32 wait status, once its stdout and stderr are closed and
 * it has been reaped).
 *
 * It does in the child what libuv does for `spawn(file, args, { detached:
 * true, stdio: ['ignore', 'pipe', 'pipe'] })`: a new session (so a new
 * process group), no blocked signals, stdin from /dev/null, stdout and
 * stderr on socket pairs (libuv's pipes are socket pairs too), the
 * environment replaced, and execvp, which searches the new environment's
 * PATH. Every other descriptor it holds is close-on-exec (Perl marks its
 * own above fd 2 so). It handles SIGCHLD, whose handler exec resets, and
 * ignores SIGPIPE, which each child puts back to the default before it
 * execs, so commands start with every disposition at its default. No
 * `use warnings`: a failed exec must not print into the
 * command's stderr. It reads a command's output only while less than
 * WINDOW bytes of it wait for Node's ack, so a command whose output
 * nobody reads blocks on its full socket. When Node goes away (its end of
 * the spawner's stdin closes, or a write to it fails) it SIGKILLs the
 * groups of commands not yet reaped, and exits.
 */
export const SPAWNER_SCRIPT = String.raw`
use strict;
use POSIX ();
use Socket ();
my $WINDOW = $ARGV[0] || 65536;
my $EINTR = POSIX::EINTR();
my $WNOHANG = POSIX::WNOHANG();
my $AF_UNIX = Socket::AF_UNIX();
my $STREAM = Socket::SOCK_STREAM();
# Looked up once here, not in each child, where POSIX loads what they need anew.
my $SETMASK = POSIX::SIG_SETMASK();
my $NOSIGNALS = POSIX::SigSet->new();
my $RDONLY = POSIX::O_RDONLY();
binmode STDIN;
binmode STDOUT;
my %cmd;
my $chld = 0;
$SIG{CHLD} = sub { $chld = 1 };
# A write to a context that has gone fails with EPIPE rather than killing
# the spawner before it has killed the commands it runs (quit).
$SIG{PIPE} = 'IGNORE';
# Every group still here, a reaped leader's too: members it left may hold its output open.
sub quit {
  kill('KILL', -$_->{pid}) for values %cmd;
  POSIX::_exit(0);
}
sub put {
  my $b = pack('NaN', 5 + length($_[2]), $_[0], $_[1]) . $_[2];
  while (length $b) {
    my $n = syswrite(STDOUT, $b);
    if (!defined $n) { next if $! == $EINTR; quit() }
    substr($b, 0, $n, '');
  }
}
sub child {
  my ($f, $o1, $o2) = @_;
  my ($umask, $procbase, $base, $cwd, $file, $argc) = splice(@$f, 0, 6);
  my @argv = splice(@$f, 0, $argc);
  POSIX::setsid();
  # An ignored signal stays ignored across exec: the command gets the default.
  $SIG{PIPE} = 'DEFAULT';
  POSIX::sigprocmask($SETMASK, $NOSIGNALS) or return $! + 0;
  umask($umask);
  if (substr($cwd, 0, 1) ne '/') { chdir($procbase) or chdir($base) or return $! + 0 }
  if ($cwd ne '') { chdir($cwd) or return $! + 0 }
  my $null = POSIX::open('/dev/null', $RDONLY);
  defined $null or return $! + 0;
  if ($null != 0) { defined POSIX::dup2($null, 0) or return $! + 0; POSIX::close($null) }
  defined POSIX::dup2(fileno($o1), 1) or return $! + 0;
  defined POSIX::dup2(fileno($o2), 2) or return $! + 0;
  exec { $file } @argv;
  return $! + 0;
}
# The command's environment, set here before the fork so that the child
# inherits it: rebuilding it in each child cost more than the rest of its
# set-up, and most commands of a context share one environment.
my $environment;
sub environment {
  my ($f) = @_;
  my @entries = @$f[6 + $f->[5] .. $#$f];
  my $wanted = join("\0", @entries);
  return if defined $environment && $wanted eq $environment;
  %ENV = ();
  for (@entries) { my $i = index($_, '='); $ENV{substr($_, 0, $i)} = substr($_, $i + 1) }
  $environment = $wanted;
}
sub start {
  my ($id, $body) = @_;
  my @f = split /\0/, $body, -1;
  environment(\@f);
  my ($r1, $w1, $r2, $w2, $er, $ew);
  socketpair($r1, $w1, $AF_UNIX, $STREAM, 0) or return put('E', $id, pack('N', $! + 0));
  socketpair($r2, $w2, $AF_UNIX, $STREAM, 0) or return put('E', $id, pack('N', $! + 0));
  pipe($er, $ew) or return put('E', $id, pack('N', $! + 0));
  my $pid = fork;
  return put('E', $id, pack('N', $! + 0)) unless defined $pid;
  if ($pid == 0) {
    close $er;
    my $e = child(\@f, $w1, $w2);
    syswrite($ew, pack('N', $e));
    POSIX::_exit(127);
  }
  close $w1;
  close $w2;
  close $ew;
  my ($buf, $n) = ('');
  do { $n = sysread($er, $buf, 4) } while (!defined $n && $! == $EINTR);
  close $er;
  if ($n) { waitpid($pid, 0); return put('E', $id, $buf) }
  $cmd{$id} = { pid => $pid, fh => { 1 => $r1, 2 => $r2 }, out => 0 };
  put('P', $id, pack('N', $pid));
}
my $in = '';
my $open = 1;
# Holds no directory of the context's (a mount it would keep busy): each child changes to the one it needs.
chdir('/');
# How long select waits while a command that closed its output runs on: backs off to 250 ms.
my $poll = 0.002;
put('R', 0, '');
while ($open) {
  my $rin = '';
  vec($rin, 0, 1) = 1;
  my $closing = 0;
  for my $c (values %cmd) {
    my $fh = $c->{fh};
    if (!%$fh) { $closing = 1; next }
    next if $c->{out} >= $WINDOW;
    vec($rin, fileno($_), 1) = 1 for values %$fh;
  }
  # A command whose output has closed waits to be reaped: poll while SIGCHLD may have come just before select.
  my $n = select(my $rout = $rin, undef, undef, $chld ? 0 : $closing ? $poll : undef);
  if ($chld) { $poll = 0.002 }
  elsif ($closing && $n == 0) { $poll *= 2 if $poll < 0.25 }
  if ($chld || $closing) {
    $chld = 0;
    for my $c (values %cmd) {
      $c->{status} = $? if !defined $c->{status} && waitpid($c->{pid}, $WNOHANG) == $c->{pid};
    }
  }
  if ($n > 0 && vec($rout, 0, 1)) {
    my $got = sysread(STDIN, $in, 65536, length $in);
    if (defined $got && $got == 0) { $open = 0; last }
    while (length($in) >= 9) {
      my $len = unpack('N', $in);
      last if length($in) < 4 + $len;
      my ($type, $id) = unpack('aN', substr($in, 4, 5));
      my $body = substr($in, 9, $len - 5);
      substr($in, 0, 4 + $len, '');
      if ($type eq 'S') { start($id, $body) }
      elsif ($type eq 'A') { my $c = $cmd{$id}; $c->{out} -= unpack('N', $body) if $c }
    }
  }
  for my $id (keys %cmd) {
    my $c = $cmd{$id};
    my $fh = $c->{fh};
    if ($n > 0) {
      for my $fd (keys %$fh) {
        next unless vec($rout, fileno($fh->{$fd}), 1);
        my $room = $WINDOW - $c->{out};
        next if $room <= 0;
        my $data;
        my $got = sysread($fh->{$fd}, $data, $room < 65536 ? $room : 65536);
        next if !defined $got && $! == $EINTR;
        if ($got) { $c->{out} += $got; put('O', $id, chr($fd) . $data) }
        else { close $fh->{$fd}; delete $fh->{$fd} }
      }
    }
    next if %$fh;
    $c->{status} = $? if !defined $c->{status} && waitpid($c->{pid}, $WNOHANG) == $c->{pid};
    next unless defined $c->{status};
    put('X', $id, pack('N', $c->{status}));
    delete $cmd{$id};
  }
}
quit();
`;
