"""The docs' example questions (warehouse/sql/example_*.sql), read from the package each time the notebook runs, so
it always shows the files as they are: the leading comment is the question, the rest the query."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from warehouse.sql_files import read_sql

EXAMPLE_PREFIX = "example_"


@dataclass(frozen=True, slots=True)
class ExampleQuestion:
    file_name: str  # e.g. "example_cost_trend.sql", under warehouse/sql/
    question: str  # the file's leading comment, without its "--" marks
    sql: str  # the rest of the file: the query, its inner comments included

    @property
    def markdown(self) -> str:
        """The question as a section: its words up to the first colon as the heading ("Cache hit rate against
        cost"), the rest as the text, and the file it comes from."""
        title, _, rest = self.question.partition(": ")
        if not rest:
            title, rest = self.file_name, self.question
        return f"## {title}\n\n{rest[:1].upper()}{rest[1:]}\n\n(`warehouse/sql/{self.file_name}`)"


def example_file_names() -> list[str]:
    """Every example file of warehouse/sql/, sorted."""
    files = resources.files("warehouse").joinpath("sql").iterdir()
    return sorted(p.name for p in files if p.name.startswith(EXAMPLE_PREFIX) and p.name.endswith(".sql"))


def example_question(file_name: str) -> ExampleQuestion:
    """The example file split into its leading comment and its query."""
    lines = read_sql(f"sql/{file_name}").strip().splitlines()
    leading = 0
    while leading < len(lines) and lines[leading].lstrip().startswith("--"):
        leading += 1
    question = " ".join(line.lstrip().removeprefix("--").strip() for line in lines[:leading])
    return ExampleQuestion(file_name, question, "\n".join(lines[leading:]).strip() + "\n")
