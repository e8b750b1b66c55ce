"""The site's MkDocs hooks: the pages that live outside ``docs/`` (the README as the home page,
the env cards, the boards, the baselines, CONTRIBUTING) join the site, and every relative link
keeps working, checked.

A link to another page of the site points at that page; a link to any other file or folder of
the repository (``agentbench_rl/harness/evaluate.py``, a results folder) becomes its GitHub
address; a link to nothing is left as written, so ``mkdocs build --strict`` fails on it. The
pages stay plain Markdown that reads the same on GitHub: the hook, not the pages, knows the site.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
GITHUB = "https://github.com/agentbench-rl/agentbench-rl"
#: Repository file -> where the site serves it (the pages under docs/ keep their own place).
PAGES = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "contributing.md",
    "leaderboards/README.md": "leaderboards/index.md",
    "baselines/README.md": "baselines.md",
    "baselines/results/fidelity/README.md": "fidelity.md",
    **{
        f"envs/{card.parent.name}/README.md": f"environments/{card.parent.name}.md"
        for card in sorted((REPO / "envs").glob("*/README.md"))
    },
}
#: Files that are not pages but are shown by one (the boards' plots), under the same layout.
ASSETS = {
    f"leaderboards/site/{image.name}": f"leaderboards/site/{image.name}"
    for image in sorted((REPO / "leaderboards" / "site").glob("*.png"))
}
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")


def site_pages() -> dict[str, str]:
    """Every page of the site: repository path -> the page's path in the site."""
    native = {
        f"docs/{page.relative_to(REPO / 'docs').as_posix()}": page.relative_to(
            REPO / "docs"
        ).as_posix()
        for page in sorted((REPO / "docs").rglob("*.md"))
    }
    return {**native, **PAGES}


def on_files(files: Files, config: Any) -> Files:
    """Add the pages and plots that live outside ``docs/``."""
    for source, target in {**PAGES, **ASSETS}.items():
        path = REPO / source
        content = path.read_text("utf-8") if source.endswith(".md") else path.read_bytes()
        files.append(File.generated(config, target, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point every relative link of the page at the site's page or the repository's file."""
    served = {site: repo for repo, site in site_pages().items()}
    served.update({site: repo for repo, site in ASSETS.items()})
    source = served[page.file.src_uri]
    return _LINK.sub(lambda match: _relinked(match, source, page.file.src_uri), markdown)


def _relinked(match: re.Match[str], source: str, page_uri: str) -> str:
    opening, target, closing = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):  # a URL, an anchor, an absolute path
        return match.group(0)
    path, _, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    site = {**site_pages(), **ASSETS}.get(repo_path)
    if site is not None:
        relative = posixpath.relpath(site, posixpath.dirname(page_uri) or ".")
        new = relative + (f"#{anchor}" if anchor else "")
    elif (REPO / repo_path).exists() and not repo_path.startswith(".."):
        kind = "tree" if (REPO / repo_path).is_dir() else "blob"
        new = f"{GITHUB}/{kind}/main/{repo_path}" + (f"#{anchor}" if anchor else "")
    else:
        return match.group(0)  # a broken link: left for --strict to report
    return f"{opening}{new}{closing}"
