"""Download and unpack the apache-tvm-ffi sdist of the installed version into DIR.

    python3 tests/python/fetch_tvm_ffi_tests.py DIR

Leaves DIR/apache_tvm_ffi-<version>/ (tvm_ffi's own tests are in its
tests/python/). pip fetches the sdist without building the package
(--no-deps; only its metadata step runs). Does nothing if it is already there.
"""

import subprocess
import sys
import tarfile
from pathlib import Path

import tvm_ffi


def main() -> int:
    root = Path(sys.argv[1])
    version = tvm_ffi.__version__
    target = root / f"apache_tvm_ffi-{version}"
    if (target / "tests" / "python").is_dir():
        return 0
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", f"apache-tvm-ffi=={version}",
                    "--no-binary", "apache-tvm-ffi", "--no-deps", "-d", str(root)], check=True)
    archive = root / f"apache_tvm_ffi-{version}.tar.gz"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"apache_tvm_ffi-{version}/tests/")
                   and (m.isfile() or m.isdir())]
        if hasattr(tarfile, "data_filter"):  # refuses links and paths leaving root
            tar.extractall(root, members=members, filter="data")
        else:
            tar.extractall(root, members=members)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
