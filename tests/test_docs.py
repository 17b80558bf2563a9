"""What the documentation shows must stay true: README.md, docs/*.md and dashboards/README.md link only to files (and
headings) that exist, every `hpo` command they show parses with the real command line (option names, arity, choices:
click's own parsing, nothing runs), and every `bash .ci/...` or `python bench/....py` they show names a file here."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "dashboards" / "README.md"]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", ""}
SEPARATORS = {"&&", "||", ";", "|", "&"}


# ---------------------------------------------------------------- reading Markdown


@dataclass
class Page:
    path: Path
    # (line number, text) of the lines of shell code blocks (fenced or indented), and of the lines outside them
    code: list[tuple[int, str]] = field(default_factory=list)
    prose: list[tuple[int, str]] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


def read_page(path: Path, text: str | None = None) -> Page:
    page = Page(path)
    lines = (path.read_text(encoding="utf-8") if text is None else text).split("\n")
    fence: str | None = None  # the open fence's language, None outside a fence
    previous_blank, in_indented = True, False
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[3:].strip().lower()
            continue
        if fence is not None:
            if stripped == "```":
                fence = None
            elif fence in SHELL_LANGUAGES:
                page.code.append((number, line))
            continue
        # an indented code block: 4 spaces after a blank line (or after another line of the block)
        in_indented = line.startswith("    ") and stripped != "" and (previous_blank or in_indented)
        if in_indented:
            page.code.append((number, stripped.removeprefix("$ ")))
        else:
            page.prose.append((number, line))
            heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if heading:
                page.headings.append(heading.group(1))
        previous_blank = stripped == ""
    return page


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text as rendered, lower case, punctuation but - and _ dropped, spaces -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for heading in page.headings:
        base = slug(heading)
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    for _, line in page.prose:  # explicit anchors: <a name="x"></a>, <a id="x">
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return found


def inline_code(line: str) -> list[str]:
    return re.findall(r"`([^`]+)`", line)


def links(page: Page) -> list[tuple[int, str]]:
    found = []
    for number, line in page.prose:
        bare = re.sub(r"`[^`]*`", "", line)  # a link inside inline code is text
        targets = re.findall(
            r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", bare
        )  # [text](target "title")
        targets += re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", bare)  # [label]: target
        found += [(number, target) for target in targets]
    return found


PARSED = {path: read_page(path) for path in PAGES}


# ---------------------------------------------------------------- relative links


def link_problem(page: Page, target: str) -> str | None:
    """Why a relative link is broken, or None when it resolves (file, and heading when it names one)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
        return None
    path_part, _, anchor = target.partition("#")
    destination = (page.path.parent / path_part).resolve() if path_part else page.path
    if ROOT not in destination.parents and destination != ROOT:
        return f"{target} leaves the repository"
    if not destination.exists():
        return f"{target}: no such file"
    if anchor and destination.suffix == ".md":
        target_page = PARSED.get(destination) or read_page(destination)
        if anchor not in anchors(target_page):
            return f"{target}: {destination.name} has no heading with the anchor #{anchor}"
    return None


ALL_LINKS = [(page, number, target) for page in PARSED.values() for number, target in links(page)]


@pytest.mark.parametrize(
    ("page", "line", "target"), ALL_LINKS, ids=[f"{p.name}:{n}:{t}" for p, n, t in ALL_LINKS]
)
def test_every_relative_link_resolves(page, line, target):
    problem = link_problem(page, target)
    assert problem is None, f"{page.name}:{line}: {problem}"


def test_the_readme_links_every_docs_page():
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(PARSED[ROOT / "README.md"])}
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def test_a_broken_link_and_a_missing_anchor_are_caught():
    page = read_page(
        ROOT / "docs" / "x.md", "# Title\n\nSee [a](trainer.md#no-such-heading) and [b](nowhere.md).\n"
    )
    problems = [link_problem(page, target) for _, target in links(page)]
    assert "no heading with the anchor #no-such-heading" in problems[0]
    assert "no such file" in problems[1]
    assert (
        slug("Distributed training (DDP, FSDP, DeepSpeed ZeRO)")
        == "distributed-training-ddp-fsdp-deepspeed-zero"
    )
    assert slug("Studies: `hpo run`") == "studies-hpo-run"


# ---------------------------------------------------------------- commands in code blocks


def strip_optional(line: str) -> tuple[str, list[str]]:
    """The line without its `# comment` and its `[--optional ...]` placeholders (a `[` that opens a word, outside
    quotes, to its `]`), and the placeholders' text."""
    kept, optional, quote, depth, current = [], [], "", 0, []
    for index, char in enumerate(line):
        if depth:
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            if depth:
                current.append(char)
            else:
                optional.append("".join(current))
                current = []
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[#" and (index == 0 or line[index - 1].isspace()):
            if char == "#":  # a comment: the rest of the line
                break
            depth = 1
            continue
        kept.append(char)
    return "".join(kept), optional


def split_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)  # `# ...` comments dropped


@dataclass
class Command:
    page: str
    line: int
    text: str
    args: list[str] | None  # what follows `hpo`; None: the line does not split as shell words
    optional: list[str]  # the text of each `[...]` placeholder

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def hpo_args(words: list[str]) -> list[str] | None:
    """The arguments of `hpo` in one simple command (`hpo`, `.venv/bin/hpo`, `python -m hpo.cli`, `--module hpo.cli`),
    or None when the command is not hpo's."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return None
    if words[0] == "hpo" or words[0].endswith("/hpo"):
        return words[1:]
    for index in range(len(words) - 1):
        if words[index] in ("-m", "--module") and words[index + 1] == "hpo.cli":
            return words[index + 2 :]
    return None


MAY_RUN_HPO = re.compile(r"(?:^|[\s/&;|])hpo(?:\s|$)|\shpo\.cli(?:\s|$)")


def commands_in(page: Page) -> list[Command]:
    found, pending, start = [], "", 0
    for number, line in page.code:
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):  # a continuation: join with the next line
            pending += line.rstrip()[:-1] + " "
            continue
        logical, pending = pending + line, ""
        if not MAY_RUN_HPO.search(logical):  # (unlabelled blocks hold layouts and prose too)
            continue
        text, optional = strip_optional(logical)
        try:
            words, segment = split_words(text) + [";"], []
        except ValueError as error:  # an unclosed quote: a shell could not run it either
            found.append(Command(page.name, start, logical.strip(), None, [str(error)]))
            continue
        for word in words:
            if word not in SEPARATORS:
                segment.append(word)
                continue
            args = hpo_args(segment)
            if args is not None:
                found.append(Command(page.name, start, logical.split(" #", 1)[0].strip(), args, optional))
            segment = []
    return found


def parse(args: list[str]) -> None:
    """Parse `hpo ARGS` as the real command line would, without running anything: the group's options, the
    subcommand's name, then its options and arguments (names, arity, types; a file name is only a string)."""
    from hpo.cli.app import cli

    with cli.make_context("hpo", list(args)) as group:
        _, rest, _ = cli.make_parser(group).parse_args(list(args))  # what follows the group's own options
        if not rest:
            raise click.UsageError("no command", group)
        name, command, sub_args = cli.resolve_command(group, rest)
        with command.make_context(name, sub_args, parent=group):
            pass


def option_names(args: list[str]) -> set[str]:
    from hpo.cli.app import cli

    name = next((a for a in args if not a.startswith("-")), None)
    command = cli.get_command(click.Context(cli), name) if name else None
    params = (command or cli).params
    return {opt for param in params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}


def option_problems(command: Command) -> list[str]:
    """Options named inside `[...]` placeholders that the subcommand does not have."""
    known = option_names(command.args)
    named = [w.split("=", 1)[0] for text in command.optional for w in re.split(r"[\s|\[\]]+", text)]
    return [w for w in named if w.startswith("-") and w not in known]


ALL_COMMANDS = [command for page in PARSED.values() for command in commands_in(page)]


def test_the_pages_show_hpo_commands():
    # the extraction must keep finding them (the README's first command included), or the test below checks nothing
    assert len(ALL_COMMANDS) >= 30, [str(c) for c in ALL_COMMANDS]
    assert ["run", "studies/digits_mlp.yaml"] in [c.args for c in ALL_COMMANDS if c.page == "README.md"]
    shown = {c.args[0] for c in ALL_COMMANDS if c.args}
    assert shown >= {"train", "run", "worker", "status", "best", "export", "retrain"}, shown


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=str)
def test_every_hpo_command_shown_parses(command):
    assert command.args is not None, f"{command}\n  a shell cannot split it: {command.optional}"
    try:
        parse(command.args)
    except click.ClickException as error:
        pytest.fail(f"{command}\n  does not parse: {error.format_message()}")
    assert not option_problems(command), f"{command}\n  no such option: {option_problems(command)}"
    studies = [a for a in command.args if a.startswith("studies/")]
    assert all((ROOT / a).exists() for a in studies), f"{command}\n  names a study file that does not exist"


BAD_COMMANDS = [
    "hpo run x.yaml --no-such-flag",
    "hpo no-such-command x.yaml",
    "hpo run",
    "hpo run a.yaml b.yaml",
    "hpo train run.yaml --nproc",
    "hpo train run.yaml --strategy zero9",
    "hpo export study.yaml",  # --out is required
    "hpo --no-such-group-option run x.yaml",
]


@pytest.mark.parametrize("text", BAD_COMMANDS)
def test_a_wrong_command_in_a_page_fails(text):
    page = read_page(ROOT / "docs" / "x.md", f"# x\n\n```bash\n{text} &   # a comment\n```\n")
    [command] = commands_in(page)
    with pytest.raises(click.ClickException):
        parse(command.args)


def test_a_wrong_option_in_a_placeholder_fails():
    page = read_page(
        ROOT / "docs" / "x.md", "```bash\nhpo run x.yaml [--n-trials N] [--no-such-flag S]\n```\n"
    )
    [command] = commands_in(page)
    parse(command.args)  # without its placeholders the command parses...
    assert option_problems(command) == ["--no-such-flag"]  # ...and the made-up option in one is still caught


def test_the_extraction_reads_shell_as_a_shell_would():
    text = (
        "```bash\n"
        "hpo train run.yaml --nproc 2 \\\n"
        "  --set 'training.fsdp_config={wrap: [BertLayer]}'   # comment [--x]\n"
        ".venv/bin/pip install x && .venv/bin/hpo run s.yaml &\n"
        "OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m hpo.cli train run.yaml [--set k=v]\n"
        "```\n\n"
        "    hpo status s.yaml\n"
    )
    found = [(c.args, c.optional) for c in commands_in(read_page(ROOT / "docs" / "x.md", text))]
    assert found == [
        (["train", "run.yaml", "--nproc", "2", "--set", "training.fsdp_config={wrap: [BertLayer]}"], []),
        (["run", "s.yaml"], []),
        (["train", "run.yaml"], ["--set k=v"]),
        (["status", "s.yaml"], []),
    ]


# ---------------------------------------------------------------- commands named in prose


PROSE_COMMANDS = [
    (page, number, span)
    for page in PARSED.values()
    for number, line in page.prose
    for span in inline_code(line)
    if re.match(r"hpo\s+\S", span)
]


def prose_problems(span: str) -> list[str]:
    """`hpo retrain --replay` in a sentence is a fragment, not a whole command: its subcommand and options must exist."""
    from hpo.cli.app import COMMANDS

    words = [w for w in re.split(r"[\s|\[\]]+", span)[1:] if w and w != "..."]
    name = next((w for w in words if not w.startswith("-")), None)
    if name is not None and name not in COMMANDS:
        return [f"no command {name!r}"]
    known = option_names(words)
    return [
        f"no option {w}" for w in (w.split("=", 1)[0] for w in words if w.startswith("-")) if w not in known
    ]


@pytest.mark.parametrize(
    ("page", "line", "span"), PROSE_COMMANDS, ids=[f"{p.name}:{n}:{s}" for p, n, s in PROSE_COMMANDS]
)
def test_every_hpo_command_named_in_prose_exists_with_its_options(page, line, span):
    assert not prose_problems(span), f"{page.name}:{line}: `{span}`: {prose_problems(span)}"


def test_a_wrong_command_named_in_prose_fails():
    assert prose_problems("hpo retrain --replay [--no-such-flag N]") == ["no option --no-such-flag"]
    assert prose_problems("hpo retrian --replay") == ["no command 'retrian'"]
    assert prose_problems("hpo --debug ...") == []


# ---------------------------------------------------------------- scripts named


def scripts_named(text: str) -> list[str]:
    found = re.findall(r"(?:^|[\s(`])bash\s+([^\s`-][^\s`]*)", text)
    found += re.findall(r"(?:^|[\s/(`])python3?\s+(?:-\S+\s+)*?([^\s`]+\.py)\b", text)
    return found


def script_sources(page: Page):
    """Each line of the shell code blocks, and each inline code span of the prose."""
    yield from page.code
    yield from ((number, span) for number, line in page.prose for span in inline_code(line))


SCRIPTS = [
    (page, number, script)
    for page in PARSED.values()
    for number, text in script_sources(page)
    for script in scripts_named(text)
]


def test_the_pages_name_scripts():
    named = {script for _, _, script in SCRIPTS}
    assert {".ci/run", ".ci/drift", "bench/peers/compare.py", "bench/pause/pbt.py"} <= named, named


@pytest.mark.parametrize(
    ("page", "line", "script"), SCRIPTS, ids=[f"{p.name}:{n}:{s}" for p, n, s in SCRIPTS]
)
def test_every_script_shown_exists(page, line, script):
    assert (ROOT / script).is_file(), f"{page.name}:{line}: {script} does not exist"


def test_a_missing_script_is_caught():
    named = scripts_named("OMP_NUM_THREADS=1 python bench/nope.py --x 1; bash .ci/nope arg")
    assert sorted(named) == [".ci/nope", "bench/nope.py"]
    assert not any((ROOT / s).is_file() for s in named)
