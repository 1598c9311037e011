"""Kubelet settings the program adds on the nodes it builds: the process table (per pod, for all pods together, and
when the kubelet evicts) and, on MicroK8s, the inode eviction signal the snap leaves out and a memory reserve.

Three process settings, the same on every built node:

- ``podPidsLimit`` (``cluster.podPidsLimit``): the most processes and threads one pod may hold; the kubelet makes it
  the pod cgroup's ``pids.max`` when it creates the pod.
- ``systemReserved`` ``pid`` (``SYSTEM_PID_RESERVE``): the kubelet's node capacity for ``pid`` is the smaller of the
  kernel's ``pid_max`` and ``threads-max`` (``pkg/kubelet/stats/pidlimit``), and with node allocatable enforced on
  pods (its default) the ``kubepods`` cgroup, parent of every pod, gets ``pids.max`` = capacity minus the reserve
  (``pkg/kubelet/cm/node_container_manager_linux.go``). However many pods one team runs, the kernel refuses their
  next task before the last ``SYSTEM_PID_RESERVE`` entries, which stay for the kernel's threads, the kubelet,
  containerd and its per-pod shims, sshd and the NVIDIA daemons. The node reports no ``pid`` allocatable, so
  scheduling does not change. 4096 is what such a node runs at its fullest (a few hundred kernel threads, one
  shim of about a dozen threads per pod at 110 pods, the daemons) with room to spare.
- ``evictionHard`` ``pid.available`` (``PID_EVICTION_THRESHOLD``): the kubelet's signal is that capacity minus the
  node's running tasks; below 10% of the table it marks the node ``PIDPressure`` (no new pod is admitted or
  scheduled there) and evicts one pod per pass, lowest priority first, then the most processes
  (``pkg/kubelet/eviction/helpers.go`` ``rankPIDPressure``). The kubelet sets no such threshold by default. A
  share rather than a count, so it scales with the table (memory over 128 KiB); it is at least the reserve on
  every node of 5 GiB or more, so pods crossing it are evicted before they fill their ``kubepods`` ceiling.

On MicroK8s the program also reserves memory for the system (``systemReserved`` ``memory``,
``cluster.microk8s.systemReservedMemory``), which the snap leaves at none (its kubelet args set no
``--system-reserved``; nodeadm's ``kubeReserved`` memory does the same on EKS). With node allocatable enforced on
pods the kubelet sets the ``kubepods`` cgroup's ``memory.max`` to the capacity less the reserves
(``node_container_manager_linux.go``, as for ``pid``), so when pods run the box out of memory the kernel's OOM killer
picks among pods, and memory pods hold without a process (tmpfs, shared memory) cannot push it on to the snap's
services outside that cgroup, k8s-dqlite among them. The kubelet applies it when it starts, and reports an
Allocatable that much lower.

MicroK8s runs the kubelet inside kubelite, which reads the kubelet's flags from the snap's args file once, when it
starts: one flag per line, blank and ``#`` lines skipped, quotes dropped, each line split at spaces (canonical/
microk8s v1.35 and v1.36, ``ReadArgsFromFile`` in the kubelite patch; ``default-args/kubelite`` names the file).
The snap's own file sets no ``--pod-max-pids`` and no ``--system-reserved``, and an ``--eviction-hard`` of its own
(memory and disk signals). A map flag given again adds to the map, but the first one replaces the kubelet's
defaults (``LangleSeparatedMapStringString.Set`` in component-base), so the program adds its entry to each line of
the flag the file has, keeping every signal in it, and writes a line of its own only when there is none.

The snap's ``--eviction-hard`` (``default-args/kubelet``: memory, node and image space) thereby drops the kubelet's
default ``nodefs.inodesFree<5%``, so a pod filling the root with empty files under its byte limit would leave the
node out of inodes with nothing evicted. The step puts that entry back (``INODE_EVICTION_THRESHOLD``): the kubelet
then marks the node ``DiskPressure`` and evicts lowest priority first, then the most inodes (``helpers.go``
``rankDiskPressureFunc``). The snap keeps the kubelet's and containerd's roots under ``$SNAP_COMMON/var/lib``, one
filesystem, so the kubelet sees no separate image filesystem and the nodefs signal covers every file a pod makes;
no ``imagefs.inodesFree`` is added. Unlike the PID entries, a site's own ``nodefs.inodesFree`` on a line stands
(ours is added only to lines without one), and removal takes out only ``nodefs.inodesFree<5%`` exactly: a site
that had written that very entry itself loses it on destroy. A line the program wrote whole goes whole on removal.

AL2023 EKS nodes are set up by nodeadm, which reads ``NodeConfig`` documents from the MIME parts of type
``application/node.eks.aws`` of the instance's user data and merges them in order, later values winning and maps
merging key by key; a managed node group of an EKS AMI type appends its own part (cluster coordinates) to the
launch template's user data, which must therefore be MIME multipart. nodeadm writes its own KubeletConfiguration
(with an ``evictionHard`` of memory and disk signals and a ``kubeReserved`` of cpu, memory and disk) and
``spec.kubelet.config`` as a drop-in, which the kubelet merges over it key by key (JSON merge patch), so the
program's part names only its own keys (awslabs/amazon-eks-ami v20260724: ``nodeadm/internal/configprovider/
mime.go``, ``internal/api/merge.go``, ``internal/kubelet/config.go``). tests/test_node_pids.py parses what this
module writes the way each reader does.

No Pulumi here.
"""

from __future__ import annotations

import base64
import re
import shlex

import yaml

from config.model_host import PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE

MICROK8S_KUBELET_ARGS = "/var/snap/microk8s/current/args/kubelet"
KUBELITE_SERVICE = "microk8s.daemon-kubelite"
KUBELET_PIDS_FLAG = "--pod-max-pids"
SYSTEM_RESERVED_FLAG = "--system-reserved"
EVICTION_HARD_FLAG = "--eviction-hard"
# The kubelet's own evictionHard on Linux (pkg/kubelet/eviction/defaults_linux.go), restated when a site's args file
# has no --eviction-hard line: a flag of ours alone would replace them.
KUBELET_DEFAULT_EVICTION_HARD = ("memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%",
                                 "imagefs.available<15%")
# The kubelet's own inode signal, which the snap's --eviction-hard leaves out.
INODE_EVICTION_THRESHOLD = "5%"

NODECONFIG_MEDIA_TYPE = "application/node.eks.aws"
NODECONFIG_API_VERSION = "node.eks.aws/v1alpha1"
USER_DATA_BOUNDARY = "gpu-tenancy-node-settings"


def _flag_lines(flag: str) -> str:
    """The lines kubelite would read as ``flag`` (leading blanks trimmed, value after "=" or a space)."""
    return rf"^[[:space:]]*{flag}([=[:space:]]|$)"


def ere_literal(text: str, delimiter: str = "/") -> str:
    """``text`` as a POSIX ERE matching itself, its ``delimiter`` escaped too (sed's ``/``; none for grep, which warns
    of a stray backslash before it)."""
    return re.sub(rf"([][.*^$+?(){{}}|\\{re.escape(delimiter)}])", r"\\\1", text)


# Kubelite drops both quote characters wherever they stand.
_QUOTES = "\"'"
# A comma right after the flag's "=" or blank (and an opening quote), left by a dropped first entry.
_LEADING_COMMA = f"s/([=[:space:]][{_QUOTES}]?),/\\1/"


class _MapEntry:
    """One entry (``pid=4096``, ``pid.available<10%``) of a kubelet map flag, as sed edits on the flag's lines.

    An entry that ``yields`` is added only to a line without its key, so a site's own value stands, and removal
    takes out only the program's exact entry."""

    def __init__(self, flag: str, key: str, separator: str, value: str, yields: bool = False):
        self.flag, self.key, self.separator, self.value, self.yields = flag, key, separator, value, yields
        self.lines = _flag_lines(flag)

    @property
    def entry(self) -> str:
        return f"{self.key}{self.separator}{self.value}"

    def _drop(self) -> str:
        # The entry wherever it stands in the value (after "=", a quote, a blank or a comma), then the commas
        # that leaves doubled, leading or trailing.
        key = ere_literal(self.key)
        value = (ere_literal(self.value) + f"([,{_QUOTES}[:space:]]|$)" if self.yields
                 else f"[^,{_QUOTES}[:space:]]*")
        ending = "\\1\\2" if self.yields else "\\1"
        return (f"s/([[:space:]{_QUOTES}=,]){key}{self.separator}{value}/{ending}/g;"
                f"s/,,+/,/g;{_LEADING_COMMA};s/,([{_QUOTES}]?)[[:space:]]*$/\\1/")

    def set_script(self) -> str:
        append = f"s/([{_QUOTES}]?)[[:space:]]*$/,{self.entry}\\1/;{_LEADING_COMMA}"
        if self.yields:
            key = ere_literal(self.key)
            return f"/{self.lines}/{{/[[:space:]{_QUOTES}=,]{key}{self.separator}/!{{{append}}}}}"
        return f"/{self.lines}/{{{self._drop()};{append}}}"

    def remove_script(self) -> str:
        # A line left without entries was the program's own: it goes.
        return (f"/{self.lines}/{{{self._drop()}}};"
                f"/^[[:space:]]*{self.flag}[=[:space:]{_QUOTES}]*$/d")


def _entries(memory_reserve: str) -> tuple[_MapEntry, ...]:
    # The inode signal before the PID one: appended last, the PID entry is where a second run puts it again.
    return (_MapEntry(SYSTEM_RESERVED_FLAG, "pid", "=", str(SYSTEM_PID_RESERVE)),
            _MapEntry(SYSTEM_RESERVED_FLAG, "memory", "=", memory_reserve),
            _MapEntry(EVICTION_HARD_FLAG, "nodefs.inodesFree", "<", INODE_EVICTION_THRESHOLD, yields=True),
            _MapEntry(EVICTION_HARD_FLAG, "pid.available", "<", PID_EVICTION_THRESHOLD))


def _new_lines(memory_reserve: str) -> dict[str, str]:
    """Per map flag, the line the program writes when the file has none: the kubelet's defaults (which a flag of
    ours alone would replace) with the program's entries, a yielding entry giving way to a default of its key."""
    lines = {}
    entries = _entries(memory_reserve)
    for flag in dict.fromkeys(entry.flag for entry in entries):
        defaults = KUBELET_DEFAULT_EVICTION_HARD if flag == EVICTION_HARD_FLAG else ()
        values = dict(default.split("<", 1) for default in defaults)
        for entry in entries:
            if entry.flag == flag and not (entry.yields and entry.key in values):
                values[entry.key] = entry.value
        separator = next(entry.separator for entry in entries if entry.flag == flag)
        lines[flag] = f"{flag}={','.join(f'{key}{separator}{value}' for key, value in values.items())}"
    return lines


def set_kubelet_settings_command(sudo: str, limit: int, memory_reserve: str, ready: str,
                                 args_file: str = MICROK8S_KUBELET_ARGS) -> str:
    """Shell that leaves MicroK8s' kubelet args with exactly one ``--pod-max-pids=<limit>`` line, the PID and memory
    reserves in ``--system-reserved`` and the PID and inode thresholds in ``--eviction-hard`` (every other entry
    kept), restarts kubelite when that changed anything, then waits for the cluster.

    The new file is written to a scratch file and copied over the old one only when they differ: run again with
    the same limit, it changes nothing and restarts nothing; with another limit it replaces the old flag (every
    spelling kubelite would read). Lines the program adds go last, the limit after the map flags, so a second run
    writes the same bytes. ``$a\\`` ends the last line with a newline when the file lacked one.
    """
    pids = _flag_lines(KUBELET_PIDS_FLAG)
    script = ["-e " + shlex.quote(f"/{pids}/d")]
    script += ["-e " + shlex.quote(entry.set_script()) for entry in _entries(memory_reserve)]
    script.append("-e " + shlex.quote("$a\\"))
    added = "; ".join(f"{sudo}grep -qE {shlex.quote(_flag_lines(flag))} {args_file} || "
                      f"printf '%s\\n' {shlex.quote(line)}" for flag, line in _new_lines(memory_reserve).items())
    missing = (f"{args_file} is missing or empty: the kubelet's arguments of the MicroK8s snap are not where "
               "this program expects them. Check 'snap list microk8s'.")
    return (f"if ! {sudo}test -s {args_file}; then echo \"{missing}\" >&2; exit 1; fi; "
            f"new=$(mktemp) && trap 'rm -f \"$new\"' EXIT && "
            f"{{ {sudo}sed -E {' '.join(script)} {args_file}; {added}; "
            f"printf '%s\\n' {shlex.quote(f'{KUBELET_PIDS_FLAG}={limit}')}; }} > \"$new\" && "
            f"if ! {sudo}cmp -s \"$new\" {args_file}; then {sudo}cp \"$new\" {args_file} && "
            f"{sudo}snap restart {KUBELITE_SERVICE}; fi && {ready}")


def remove_kubelet_settings_command(sudo: str, memory_reserve: str, ready: str,
                                    args_file: str = MICROK8S_KUBELET_ARGS) -> str:
    """Shell that takes the program's flag and entries out of MicroK8s' kubelet args again (the snap's own
    arguments: no limit, no reserves, its own eviction signals) and restarts kubelite; nothing when there is
    nothing of the program's left, or no snap."""
    pids = _flag_lines(KUBELET_PIDS_FLAG)
    # A line the program wrote whole goes whole, defaults and all.
    own = [f"/^{ere_literal(line)}$/d" for line in _new_lines(memory_reserve).values()]
    script = ["-e " + shlex.quote(command) for command in (f"/{pids}/d", *own)]
    script += ["-e " + shlex.quote(entry.remove_script()) for entry in _entries(memory_reserve)]
    return (f"if {sudo}test -e {args_file}; then new=$(mktemp) && trap 'rm -f \"$new\"' EXIT && "
            f"{sudo}sed -E {' '.join(script)} {args_file} > \"$new\" && "
            f"if ! {sudo}cmp -s \"$new\" {args_file}; then {sudo}cp \"$new\" {args_file} && "
            f"{sudo}snap restart {KUBELITE_SERVICE} && {ready}; fi; fi")


def kubelet_node_pid_config(limit: int) -> dict:
    """The kubelet settings of every built node, as KubeletConfiguration fields."""
    return {"podPidsLimit": limit, "systemReserved": {"pid": str(SYSTEM_PID_RESERVE)},
            "evictionHard": {"pid.available": PID_EVICTION_THRESHOLD}}


def eks_node_user_data(limit: int) -> str:
    """A launch template's user data (base64, as EC2 takes it): one NodeConfig part with the kubelet settings."""
    node_config = yaml.safe_dump({"apiVersion": NODECONFIG_API_VERSION, "kind": "NodeConfig",
                                  "spec": {"kubelet": {"config": kubelet_node_pid_config(limit)}}}, sort_keys=False)
    text = (f"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{USER_DATA_BOUNDARY}\"\n\n"
            f"--{USER_DATA_BOUNDARY}\nContent-Type: {NODECONFIG_MEDIA_TYPE}\n\n---\n{node_config}\n"
            f"--{USER_DATA_BOUNDARY}--\n")
    return base64.b64encode(text.encode()).decode()
