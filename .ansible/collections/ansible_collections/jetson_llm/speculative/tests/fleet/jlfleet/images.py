# SPDX-License-Identifier: Apache-2.0
"""Images of the simulated fleet.

Three root filesystem tarballs are cached machine-wide in config.CACHE, each keyed by a hash of
what goes into it, so later runs and fresh clones on the same machine reuse them:

- ``rootfs-base-KEY.tar``: debootstrap bookworm minbase plus config.BASE_PACKAGES;
- ``rootfs-docker-KEY.tar``: the same plus config.DOCKER_PACKAGES (container-capable hosts);
- ``rootfs-pyroot-KEY.tar``: a trimmed root holding only python3, PyYAML, dash and busybox,
  from which the container-capable hosts import their stand-in vLLM images.

The podman images ``localhost/jetson-llm/host`` and ``localhost/jetson-llm/host-docker`` are built
from them with ``podman build --network none`` and carry a label with the hash of every input, so
they are rebuilt only when an input changes.
"""

import fcntl
import hashlib
import os
import shutil
import stat
import tarfile
import time

from . import config
from .util import FleetError, log, podman, run, sha256_tree

PYROOT_RECIPE = "pyroot-v3"
PYROOT_STDLIB_EXCLUDE = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "unittest"}
BUSYBOX_APPLETS = (
    "cat chmod cp date df du echo env false find grep head id kill ln ls mkdir mv printf ps pwd rm sed sleep tail tar tee touch true uname wc which"
).split()


def _key(*parts):
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def rootfs_keys():
    base = _key("base-v1", config.SUITE, "minbase", *config.BASE_PACKAGES)
    docker = _key("docker-v1", base, *config.DOCKER_PACKAGES)
    pyroot = _key(PYROOT_RECIPE, docker, *sorted(PYROOT_STDLIB_EXCLUDE), *BUSYBOX_APPLETS)
    return {"base": base, "docker": docker, "pyroot": pyroot}


def tarball(kind, keys=None):
    keys = keys or rootfs_keys()
    return os.path.join(config.CACHE, "rootfs-%s-%s.tar" % (kind, keys[kind]))


# ------------------------------------------------------------------ root filesystems


def _chroot_apt(root, packages):
    """Install packages into root (network to the Debian mirror needed), in a private mount namespace."""
    shutil.copyfile("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
    inner = "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends %s >/dev/null && apt-get clean" % " ".join(
        packages
    )
    script = 'mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && chroot "$1" sh -c "$2"'
    run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", root, inner], capture=True)
    _slim(root)


def _slim(root):
    """Drop package lists, docs and man pages; empty resolv.conf (hosts get an empty one bind-mounted)."""
    for sub in ("var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt"):
        p = os.path.join(root, sub)
        if os.path.isdir(p):
            for entry in os.listdir(p):
                q = os.path.join(p, entry)
                if os.path.isdir(q) and not os.path.islink(q):
                    shutil.rmtree(q)
                elif entry != "lock":
                    os.unlink(q)
    with open(os.path.join(root, "etc", "resolv.conf"), "w"):
        pass


def _tar_dir(root, out):
    tmp = out + ".part"
    run(["tar", "--numeric-owner", "--xattrs", "-C", root, "-cf", tmp, "."])
    os.replace(tmp, out)


def _untar(tar, root):
    os.makedirs(root, exist_ok=True)
    run(["tar", "--numeric-owner", "--xattrs", "-C", root, "-xpf", tar])


def ensure_rootfs():
    """Build whichever cached tarballs are missing. Returns {kind: path}."""
    keys = rootfs_keys()
    paths = {k: tarball(k, keys) for k in keys}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    os.makedirs(config.CACHE, exist_ok=True)
    with open(os.path.join(config.CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(os.path.exists(p) for p in paths.values()):
            return paths
        work = os.path.join(config.CACHE, "work-%d" % os.getpid())
        root = os.path.join(work, "rootfs")
        try:
            if os.path.exists(paths["docker"]) and not os.path.exists(paths["base"]):
                raise FleetError("cache inconsistent: %s without %s; remove %s" % (paths["docker"], paths["base"], config.CACHE))
            if os.path.exists(paths["docker"]):
                _untar(paths["docker"], root)
            elif os.path.exists(paths["base"]):
                _untar(paths["base"], root)
            else:
                t = time.monotonic()
                log("debootstrap --variant=minbase %s from %s (needs the Debian mirror once)" % (config.SUITE, config.DEBIAN_MIRROR))
                os.makedirs(work, exist_ok=True)
                run(["debootstrap", "--variant=minbase", config.SUITE, root, config.DEBIAN_MIRROR])
                policy = os.path.join(root, "usr", "sbin", "policy-rc.d")
                with open(policy, "w") as f:
                    f.write("#!/bin/sh\nexit 101\n")
                os.chmod(policy, 0o755)  # noqa: S103 - an executable script in the image
                log("installing base packages: %s" % " ".join(config.BASE_PACKAGES))
                _chroot_apt(root, config.BASE_PACKAGES)
                _tar_dir(root, paths["base"])
                log("base root filesystem cached: %s (%.1f s)" % (paths["base"], time.monotonic() - t))
            if not os.path.exists(paths["docker"]):
                t = time.monotonic()
                log("installing container packages: %s" % " ".join(config.DOCKER_PACKAGES))
                _chroot_apt(root, config.DOCKER_PACKAGES)
                _tar_dir(root, paths["docker"])
                log("docker root filesystem cached: %s (%.1f s)" % (paths["docker"], time.monotonic() - t))
            if not os.path.exists(paths["pyroot"]):
                t = time.monotonic()
                build_pyroot(root, paths["pyroot"])
                log("python root filesystem cached: %s (%.1f s)" % (paths["pyroot"], time.monotonic() - t))
        finally:
            if os.path.isdir(work):
                shutil.rmtree(work)
        return paths


# ------------------------------------------------------------------ trimmed python root


class _Collector:
    """Collects paths of a root filesystem, following symlinks component by component."""

    def __init__(self, root):
        self.root = root
        self.paths = set()

    def _real(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def add(self, path, recursive=True, exclude=()):
        parts = [x for x in path.split("/") if x]
        cur = ""
        for i, comp in enumerate(parts):
            cur = cur + "/" + comp
            real = self._real(cur)
            if os.path.islink(real):
                self.paths.add(cur)
                target = os.readlink(real)
                base = target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(cur), target))
                rest = "/".join(parts[i + 1 :])
                return self.add(base + ("/" + rest if rest else ""), recursive, exclude)
            if not os.path.lexists(real):
                raise FleetError("pyroot: %s missing in the root filesystem" % cur)
        self.paths.add(cur)
        real = self._real(cur)
        if recursive and os.path.isdir(real):
            for d, dirs, files in os.walk(real):
                dirs[:] = [x for x in dirs if x not in exclude]
                rel = "/" + os.path.relpath(d, self.root)
                for name in dirs + files:
                    p = rel + "/" + name
                    if os.path.islink(self._real(p)) and name in dirs:
                        self.add(p)
                    else:
                        self.paths.add(p)
        return None

    def with_parents(self):
        out = set()
        for path in self.paths:
            p = path
            while p not in ("", "/"):
                out.add(p)
                p = os.path.dirname(p)
        return sorted(out)


def build_pyroot(root, out):
    """Write a tarball holding python3 + PyYAML + dash + busybox taken from root."""
    c = _Collector(root)
    py = sorted(x for x in os.listdir(os.path.join(root, "usr/lib")) if x.startswith("python3.") and x[8:].isdigit())
    if not py:
        raise FleetError("pyroot: no /usr/lib/python3.N in the root filesystem")
    pyver = py[-1]
    for p in ("/usr/bin/python3", "/usr/bin/" + pyver, "/usr/bin/dash", "/bin/sh", "/bin/busybox",
              "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/os-release", "/etc/debian_version",
              "/etc/ld.so.cache", "/lib64", "/lib", "/sbin", "/bin"):  # fmt: skip
        c.add(p, recursive=False)
    c.add("/usr/lib/" + pyver, exclude=PYROOT_STDLIB_EXCLUDE)
    dist = "/usr/lib/python3/dist-packages"
    for name in sorted(os.listdir(c._real(dist))):
        if name == "yaml" or name.startswith(("_yaml", "PyYAML")):
            c.add(dist + "/" + name)
    elfs = [p for p in sorted(c.paths) if p.endswith(".so") or p == "/usr/bin/" + pyver or p == "/usr/bin/dash"]
    elfs = [p for p in elfs if os.path.isfile(c._real(p)) and not os.path.islink(c._real(p))]
    ldd = run(["chroot", root, "/usr/bin/ldd", *elfs]).stdout
    for raw in ldd.splitlines():
        line = raw.strip()
        lib = None
        if "=>" in line:
            lib = line.split("=>", 1)[1].split("(")[0].strip()
        elif line.startswith("/") and "(" in line:
            lib = line.split("(")[0].strip()
        if lib and lib.startswith("/"):
            c.add(lib, recursive=False)
    tmp = out + ".part"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
        written = set(c.with_parents())
        for p in sorted(written):
            tf.add(c._real(p), arcname="." + p, recursive=False)
        for d, mode in (("tmp", 0o1777), ("var/tmp", 0o1777), ("root", 0o700), ("proc", 0o755), ("sys", 0o755),
                        ("dev", 0o755), ("run", 0o755), ("etc/vllm-sim", 0o755), ("opt/vllm/bin", 0o755),
                        ("opt/vllm/lib/vllm_sim", 0o755), ("root/.cache/huggingface", 0o755),
                        ("vllm-workspace", 0o755), ("usr/local/bin", 0o755)):  # fmt: skip
            for sub in _prefixes(d):
                if "/" + sub not in written:
                    ti = tarfile.TarInfo("./" + sub)
                    ti.type = tarfile.DIRTYPE
                    ti.mode = mode if sub == d else 0o755
                    tf.addfile(ti)
                    written.add("/" + sub)
        for applet in BUSYBOX_APPLETS:
            if ("/usr/bin/" + applet) in written:
                continue
            ti = tarfile.TarInfo("./usr/local/bin/" + applet)
            ti.type = tarfile.SYMTYPE
            ti.linkname = "/bin/busybox"
            ti.mode = 0o777
            tf.addfile(ti)
        ti = tarfile.TarInfo("./usr/local/bin/vllm")
        ti.type = tarfile.SYMTYPE
        ti.linkname = "/opt/vllm/bin/vllm"
        ti.mode = 0o777
        tf.addfile(ti)
    os.replace(tmp, out)


def _prefixes(d):
    parts = d.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


# ------------------------------------------------------------------ podman images


def _image_label(image):
    proc = podman("image", "inspect", "--format", '{{index .Labels "jetson-llm.inputs"}}', image, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _ensure_imported(tar, tag):
    if podman("image", "exists", tag, check=False).returncode == 0:
        return
    t = time.monotonic()
    podman("import", "--quiet", tar, tag)
    log("imported %s as %s (%.1f s)" % (os.path.basename(tar), tag, time.monotonic() - t))


def _copy_tree(src, dst):
    for d, _dirs, files in os.walk(src):
        rel = os.path.relpath(d, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            s = os.path.join(d, f)
            t = os.path.join(dst, rel, f)
            shutil.copy2(s, t, follow_symlinks=False)


def image_inputs(kind, keys=None):
    keys = keys or rootfs_keys()
    common = os.path.join(config.IMAGE_SRC, "common")
    cfile = os.path.join(config.IMAGE_SRC, "Containerfile.%s" % kind)
    if kind == "host":
        return sha256_tree([common, cfile], extra=keys["base"])
    docker = os.path.join(config.IMAGE_SRC, "docker")
    return sha256_tree([common, docker, cfile], extra=keys["docker"] + keys["pyroot"])


def ensure_images(kinds=("host", "docker")):
    """Build the podman images that are missing or out of date. Returns {kind: seconds spent}."""
    spent = {}
    t0 = time.monotonic()
    paths = ensure_rootfs()
    spent["rootfs"] = time.monotonic() - t0
    keys = rootfs_keys()
    for kind in kinds:
        t = time.monotonic()
        image = config.HOST_IMAGE if kind == "host" else config.DOCKER_IMAGE
        rootfs_kind = "base" if kind == "host" else "docker"
        inputs = image_inputs(kind, keys)
        if _image_label(image) == inputs:
            continue
        base_tag = "%s:%s-%s" % (config.ROOTFS_IMAGE, rootfs_kind, keys[rootfs_kind])
        _ensure_imported(paths[rootfs_kind], base_tag)
        ctx = os.path.join(config.BUILD_DIR, kind)
        if os.path.isdir(ctx):
            shutil.rmtree(ctx)
        _copy_tree(os.path.join(config.IMAGE_SRC, "common"), os.path.join(ctx, "rootfs"))
        if kind == "docker":
            _copy_tree(os.path.join(config.IMAGE_SRC, "docker"), os.path.join(ctx, "rootfs"))
            os.makedirs(os.path.join(ctx, "rootfs", "opt", "jlf"), exist_ok=True)
            # hard link when possible: the tarball is large and the build context is copied anyway
            dst = os.path.join(ctx, "rootfs", "opt", "jlf", "vllm-rootfs.tar")
            try:
                os.link(paths["pyroot"], dst)
            except OSError:
                shutil.copyfile(paths["pyroot"], dst)
        _fix_modes(os.path.join(ctx, "rootfs"))
        shutil.copyfile(os.path.join(config.IMAGE_SRC, "Containerfile.%s" % kind), os.path.join(ctx, "Containerfile"))
        log("building %s" % image)
        podman(
            "build", "--network", "none", "--pull=never", "--quiet",
            "--build-arg", "BASE=" + base_tag, "--label", "jetson-llm.inputs=" + inputs,
            "-t", image, "-f", os.path.join(ctx, "Containerfile"), ctx,
        )  # fmt: skip
        shutil.rmtree(ctx)
        spent[kind] = time.monotonic() - t
        log("built %s (%.1f s)" % (image, spent[kind]))
    podman("image", "prune", "-f", check=False)
    return spent


def _fix_modes(tree):
    """Files under image/ keep their git modes; make sure scripts are executable and nothing is group-writable."""
    for d, _dirs, files in os.walk(tree):
        os.chmod(d, 0o755)  # noqa: S103 - image directories are world-readable
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                head = fh.read(2)
            mode = os.stat(p).st_mode
            exe = head == b"#!" or bool(mode & stat.S_IXUSR)
            os.chmod(p, 0o755 if exe else 0o644)


def rootfs_sizes():
    out = {}
    for kind, path in ((k, tarball(k)) for k in ("base", "docker", "pyroot")):
        out[kind] = os.path.getsize(path) if os.path.exists(path) else None
    return out


def remove_cache():
    if os.path.isdir(config.CACHE):
        shutil.rmtree(config.CACHE)
