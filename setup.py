"""Build hook: the wheel carries the browser face, so a plain install is the product.

`app.py`, `pages/`, `assets/` and `.streamlit/config.toml` live at the top of the
source tree, where a checkout runs them. A built wheel keeps them in one folder,
`carelens_app/`, beside the packages in site-packages (not as top-level `app`
and `pages` modules there, which other distributions could collide with);
`carelens serve` finds them there (`cli.app_dir`). Everything else is in
pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
APP_FOLDER = "carelens_app"
APP_FILES = ("app.py", "pages/*.py", "assets/*", ".streamlit/config.toml")


class BuildWithApp(build_py):
    """`build_py`, plus the app's files copied into `carelens_app/` of the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs app.py where it is
        for pattern in APP_FILES:
            found = sorted(HERE.glob(pattern))
            if not found:
                raise FileNotFoundError(f"{HERE / pattern}: the app's files are missing")
            for src in found:
                dest = Path(self.build_lib) / APP_FOLDER / src.relative_to(HERE)
                self.mkpath(str(dest.parent))
                self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildWithApp})
