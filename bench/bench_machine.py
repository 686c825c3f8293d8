"""What the Python benches record of the machine they ran on."""
import os
import platform


def cpu_name():
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe():
    """{"cpu": model name, "cores": logical CPUs}, for a bench's JSON."""
    return {"cpu": cpu_name(), "cores": os.cpu_count()}
