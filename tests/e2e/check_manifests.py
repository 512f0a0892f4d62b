#!/usr/bin/env python3
"""Structural checks of deploy/k8s/*.yaml, offline (no cluster, no kubectl).

Usage: check_manifests.py K8S_DIR LOUPED_SERVICE_UNIT LOUPED_BINARY

Checks what a cluster would only reveal at run time: every object is
well-formed; every volume, ConfigMap, Secret and Service a pod refers to
exists; louped's containers hold exactly the systemd unit's capabilities
(drop ALL, add those), mount BTF read-only and share the control socket;
the sidecar shares its pod's PID namespace and gives louped the host's
/proc as proc_root; the DaemonSet uses hostPID; every louped.toml in a
ConfigMap passes `louped --check-config`; and the collector address in it
names the collector Service and port.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import yaml


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def load(k8s_dir):
    objects = []
    for path in sorted(glob.glob(os.path.join(k8s_dir, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                for key in ("apiVersion", "kind", "metadata"):
                    if key not in doc:
                        fail(f"{path}: an object without {key}")
                if "name" not in doc["metadata"]:
                    fail(f"{path}: a {doc['kind']} without metadata.name")
                doc["_file"] = os.path.basename(path)
                objects.append(doc)
    return objects


def unit_capabilities(unit):
    with open(unit) as f:
        for line in f:
            if line.startswith("AmbientCapabilities="):
                return sorted(c.removeprefix("CAP_") for c in line.split("=", 1)[1].split())
    fail(f"{unit}: no AmbientCapabilities")


def named(objects, kind, name, namespace):
    return any(o["kind"] == kind and o["metadata"]["name"] == name
               and o["metadata"].get("namespace") == namespace for o in objects)


def check_pod(objects, owner, spec, namespace, caps, louped):
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    where = f"{owner['_file']} {owner['kind']}/{owner['metadata']['name']}"
    for volume in volumes.values():
        if "configMap" in volume and not named(objects, "ConfigMap", volume["configMap"]["name"], namespace):
            fail(f"{where}: ConfigMap {volume['configMap']['name']} is not defined")
        if "secret" in volume and not named(objects, "Secret", volume["secret"]["secretName"], namespace):
            fail(f"{where}: Secret {volume['secret']['secretName']} is not defined")
        if "persistentVolumeClaim" in volume and not named(
                objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], namespace):
            fail(f"{where}: PersistentVolumeClaim is not defined")
    louped_containers = []
    for container in spec["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in volumes:
                fail(f"{where}: container {container['name']} mounts undefined volume {mount['name']}")
        if container.get("image", "").startswith("loupe:") and container.get(
                "command", ["/usr/bin/louped"])[0] == "/usr/bin/louped":
            louped_containers.append(container)
    for container in louped_containers:
        security = container.get("securityContext", {})
        added = sorted(security.get("capabilities", {}).get("add", []))
        if added != caps:
            fail(f"{where}: louped adds {added}, the systemd unit grants {caps}")
        if security.get("capabilities", {}).get("drop") != ["ALL"]:
            fail(f"{where}: louped must drop ALL other capabilities")
        if security.get("allowPrivilegeEscalation") is not False:
            fail(f"{where}: louped must set allowPrivilegeEscalation: false")
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        btf = mounts.get("/sys/kernel/btf")
        if not btf or not btf.get("readOnly"):
            fail(f"{where}: louped needs /sys/kernel/btf mounted read-only")
        if "/run/loupe" not in mounts:
            fail(f"{where}: louped's control socket folder /run/loupe is not mounted")
        config_mount = mounts.get("/etc/loupe/louped.toml")
        if not config_mount:
            fail(f"{where}: louped's config is not mounted at /etc/loupe/louped.toml")
        config_map = volumes[config_mount["name"]]["configMap"]["name"]
        return louped_containers, volumes, config_map, mounts
    return [], volumes, None, {}


def config_of(objects, name, namespace):
    for o in objects:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name \
                and o["metadata"].get("namespace") == namespace:
            return o["data"]["louped.toml"]
    fail(f"ConfigMap {name} not found")


def check_config(objects, text, louped, where):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    # The token is the pod's, mounted from a Secret: a stand-in here, read
    # as the shipper reads the real one.
    with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as token:
        token.write("stand-in-token-0123456789\n")
    # --check-config also checks the host (proc_root is a procfs): the
    # node's /proc, mounted at /host/proc in the pod, is this machine's /proc.
    command = [louped, "--config", f.name, "--check-config", "--proc-root", "/proc"]
    if re.search(r'^collector_token_file = ', text, re.M):
        command += ["--collector-token-file", token.name]
    result = subprocess.run(command, capture_output=True, text=True)
    os.unlink(f.name)
    os.unlink(token.name)
    if result.returncode != 0:
        fail(f"{where}: louped.toml is refused: {result.stderr.strip()}")
    match = re.search(r'^collector = "([^".]+)\.([^".]+)\.svc:(\d+)"', text, re.M)
    if not match:
        fail(f"{where}: louped.toml ships to no collector Service")
    service, namespace, port = match.group(1), match.group(2), int(match.group(3))
    for o in objects:
        if o["kind"] == "Service" and o["metadata"]["name"] == service \
                and o["metadata"].get("namespace") == namespace:
            if port not in [p["port"] for p in o["spec"]["ports"]]:
                fail(f"{where}: Service {service} has no port {port}")
            return
    fail(f"{where}: collector Service {service}.{namespace} is not defined")


def main():
    k8s_dir, unit, louped = sys.argv[1:4]
    objects = load(k8s_dir)
    caps = unit_capabilities(unit)
    kinds = {}
    for o in objects:
        kinds.setdefault(o["kind"], []).append(o)
        if o["kind"] not in ("Deployment", "DaemonSet"):
            continue
        namespace = o["metadata"].get("namespace")
        spec = o["spec"]["template"]["spec"]
        if o["spec"]["selector"]["matchLabels"].items() - o["spec"]["template"]["metadata"]["labels"].items():
            fail(f"{o['_file']}: {o['kind']}/{o['metadata']['name']} selector does not match its pods")
        containers, volumes, config_map, mounts = check_pod(objects, o, spec, namespace, caps, louped)
        if not containers:
            continue
        text = config_of(objects, config_map, namespace)
        where = f"{o['_file']} {o['kind']}/{o['metadata']['name']}"
        check_config(objects, text, louped, where)
        # The token file the config names is where the pod mounts it.
        token_file = re.search(r'^collector_token_file = "([^"]+)"', text, re.M)
        if token_file and os.path.dirname(token_file.group(1)) not in mounts:
            fail(f"{where}: collector_token_file {token_file.group(1)} is in no mounted volume")
        if o["kind"] == "DaemonSet":
            if spec.get("hostPID") is not True:
                fail(f"{where}: the DaemonSet must run in the host's PID namespace (hostPID)")
        else:
            if spec.get("shareProcessNamespace") is not True:
                fail(f"{where}: the sidecar's pod must share its PID namespace")
            if len(spec["containers"]) < 2:
                fail(f"{where}: the sidecar needs the application container beside louped")
            proc_root = re.search(r'^proc_root = "([^"]+)"', text, re.M)
            if not proc_root:
                fail(f"{where}: a louped without hostPID needs proc_root")
            host_proc = mounts.get(proc_root.group(1))
            if not host_proc or not host_proc.get("readOnly") or \
                    volumes[host_proc["name"]].get("hostPath", {}).get("path") != "/proc":
                fail(f"{where}: proc_root {proc_root.group(1)} is not the host's /proc, read-only")
            socket_volume = mounts["/run/loupe"]["name"]
            if "emptyDir" not in volumes[socket_volume]:
                fail(f"{where}: the control socket should be on a shared emptyDir")
            sharing = [c["name"] for c in spec["containers"]
                       if any(m["name"] == socket_volume for m in c.get("volumeMounts", []))]
            if len(sharing) < 2:
                fail(f"{where}: only {sharing} mount the control socket")
    for kind in ("DaemonSet", "Deployment", "Service", "ConfigMap", "Secret"):
        if kind not in kinds:
            fail(f"no {kind} in {k8s_dir}")
    collector = [o for o in kinds["Deployment"] if o["metadata"]["name"] == "loupe-collector"]
    if not collector:
        fail("no loupe-collector Deployment")
    ports = [p["containerPort"] for p in collector[0]["spec"]["template"]["spec"]["containers"][0]["ports"]]
    args = " ".join(collector[0]["spec"]["template"]["spec"]["containers"][0]["args"])
    if f":{ports[0]}" not in args:
        fail(f"loupe-collector listens ({args}) elsewhere than its containerPort {ports[0]}")
    print(f"manifests: {len(objects)} objects checked")


if __name__ == "__main__":
    main()
