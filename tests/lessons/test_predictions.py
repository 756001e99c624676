"""Every "predict, then run" question is asked before it is answered.

For each question the lessons register (backproplab/course/exercises/lessonNN.py): its
question and hint, and the message a wrong guess gets, hold no form of the
answer. For each prediction in a lesson: the question cell, the guess cell's
task and the check cell's source hold no form of it either; the check carries
0 points (a guess can be changed after the reveal); the reveal comes right
after the check, and only then the prose about the answer, folded under "After the
reveal" (JupyterLab hides it until the learner opens it). And what a learner's screen
shows: in the learner copy (`backproplab learn`), no cell from the question down to the
next heading after the reveal (the fold's own heading, when there is one) holds a form
of the answer (IN_WORDS adds the ways a lesson's prose says an answer in words).
"""

from __future__ import annotations

import importlib
import io
import math
import re
import tokenize
from pathlib import Path

import nbformat
import pytest

import backproplab as bl
from backproplab.course.assignment import after_reveal_folds, heading_level
from backproplab.course.grading import _answer_of

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
# A lesson's module is lessonNN.py, or a package lessonNN/ when its checks are long.
MODULES = sorted(
    path for path in (ROOT / "backproplab" / "course" / "exercises").glob("lesson[0-9][0-9]*")
    if path.suffix == ".py" or (path / "__init__.py").is_file())


def _questions() -> list[tuple[str, bl.Prediction]]:
    found = []
    for path in MODULES:
        module = importlib.import_module(f"backproplab.course.exercises.{path.stem}")
        found += sorted(getattr(module, "PREDICTIONS", {}).items())
    return found


QUESTIONS = _questions()


def _number_forms(value: float) -> set[str]:
    forms = {f"{value:g}", repr(float(value))}
    if math.isfinite(value) and value == int(value):
        forms.add(str(int(value)))
    return forms


def _forms(answer: object) -> list[str]:
    """Regular expressions for ways of writing the answer down."""
    if isinstance(answer, bool):
        return [rf"\b{answer}\b"]
    if isinstance(answer, str):
        return [rf"(?i)\b{re.escape(answer)}\b"]
    if hasattr(answer, "tolist"):
        answer = answer.tolist()
    if isinstance(answer, (int, float)):
        return [rf"(?<![\w.]){re.escape(f)}(?![\w]|\.\d)" for f in _number_forms(answer)]
    if isinstance(answer, (list, tuple)):
        if all(isinstance(a, str) for a in answer):
            # One name alone is also how a question lists its candidates: not counted.
            if len(answer) < 2:
                return []
            return [r"(?i)\b" + r"\W+".join(re.escape(a) for a in answer) + r"\b"]
        if all(isinstance(a, (int, float)) for a in answer):
            parts = [sorted(_number_forms(a), key=len)[0] for a in answer]
            return [r"(?<![\w.])" + r"\W+(?:and\W+)?".join(map(re.escape, parts)) + r"(?![\w])"]
    return []


def _leaks(text: str, answer: object, choices: tuple | None) -> list[str]:
    """The answer's forms found in ``text``; naming every choice gives nothing away."""
    if choices is not None and all(any(re.search(f, text) for f in _forms(c)) for c in choices):
        return []
    if isinstance(answer, bool) and re.search(rf"\b{not answer}\b", text):
        return []  # "True or False" names both
    return [f for f in _forms(answer) if re.search(f, text)]


def _wrong_guess(answer: object, choices: tuple | None) -> object:
    if choices is not None:
        return next(c for c in choices if not bl.course.grading._matches(c, answer))
    if isinstance(answer, bool):
        return not answer
    if isinstance(answer, str):
        return "zzz"
    if hasattr(answer, "tolist"):
        answer = answer.tolist()
    if isinstance(answer, (list, tuple)):
        return type(answer)(_wrong_guess(a, None) for a in answer)
    return answer + 1.5 if answer is not None else 0.5


def test_the_lessons_register_their_questions():
    assert len(QUESTIONS) >= len(LESSONS) - 1, [k for k, _ in QUESTIONS]


@pytest.mark.parametrize(("key", "question"), QUESTIONS, ids=[k for k, _ in QUESTIONS])
def test_question_hint_and_wrong_guess_message_hold_no_answer(key, question):
    answer = _answer_of(question)
    for where, text in (("question", question.question), ("hint", question.hint)):
        assert not _leaks(text, answer, question.choices), f"{key}: the {where} gives it away"
    guess = _wrong_guess(answer, question.choices)
    report = bl.course.grading.prediction_report(question, guess)
    assert not report.ok, f"{key}: {guess!r} was accepted"
    message = " ".join(str(report).split()).replace(
        f"(you predicted {bl.course.grading._show(guess)})", "")
    assert not _leaks(message, answer, question.choices), f"{key}: {message}"
    assert "not quite" in message


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _predictions(nb):
    """(question markdown, guess cell, check cell, the cell after the check) per prediction."""
    cells = nb.cells
    for i, cell in enumerate(cells):
        if _meta(cell).get("solution") and "predict" in _meta(cell).get("grade_id", ""):
            question = next(c for c in reversed(cells[:i]) if c.cell_type == "markdown")
            j = next(k for k in range(i + 1, len(cells)) if cells[k].cell_type == "code")
            yield question, cell, cells[j], cells[j + 1] if j + 1 < len(cells) else None


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_each_prediction_is_asked_checked_then_revealed(lesson):
    nb = nbformat.read(lesson, as_version=4)
    found = list(_predictions(nb))
    assert found, f"{lesson.name}: no prediction"
    for question, guess, check, after in found:
        grade_id = _meta(guess)["grade_id"]
        called = re.search(r"bl\.check_prediction\(\s*\"([^\"]+)\"", check.source)
        assert called, f"{grade_id}: the check does not call bl.check_prediction by id"
        key = called.group(1)
        assert _meta(check).get("points") == 0, f"{grade_id}: a prediction is worth 0 points"
        assert after is not None and after.cell_type == "code" and not _meta(after)
        assert re.search(rf"bl\.reveal\(\s*\"{re.escape(key)}\"\s*\)", after.source), (
            f"{grade_id}: the cell after the check must reveal {key!r}")
        prediction = bl.course.exercises.find_prediction(key)
        answer = _answer_of(prediction)
        task = "\n".join(line for line in guess.source.splitlines()
                         if line.lstrip().startswith("#") and "SOLUTION" not in line)
        for where, text in (("question", question.source), ("guess cell's comments", task),
                            ("check cell", check.source)):
            leaks = _leaks(text, answer, prediction.choices)
            assert not leaks, f"{lesson.name} {grade_id}: the {where} gives the answer away"



# Answers the prose can state in words rather than as a value: what a lesson once
# wrote right under a reveal, so it cannot come back above one.
IN_WORDS = {
    "l01-predict-leaves": [r"`a` is (?:a|the only) leaf", r"`c` and `e`\s+are\s+non-leaves"],
    "l09-predict-max-ties": [r"(?i)splits? the gradient evenly", r"(?i)\beven split"],
    "l12-predict-maxes": [r"(?i)does not depend on\s+`?logit_maxes",
                          r"(?i)gradient there is\s+(?:0|zero)"],
    "l12-predict-db1": [r"(?i)does not depend on\s+`?b1", r"(?i)nothing to learn"],
    "l01-predict-rows": [r"(?i)every row of `w\.grad` is the same"],
    "l06-predict-zero-grad": [r"(?m)^`None`:"],
    "l16-predict-recompute": [r"(?i)\bran twice\b", r"(?i)one extra forward of\s+each"],
    # Yes/no and either/or answers, as the text under their folds says them.
    "l02-predict-paths": [r"(?i)contributions of the paths\s+add up", r"(?i)receiving their sum",
                          r"(?i)sums what arrives", r"(?i)collects\s+\$?-1 - 3"],
    "l05-predict-second": [r"(?i)\.grad`?\s+accumulates", r"(?i)adds\s+into whatever",
                           r"(?i)did not replace the first"],
    "l08-predict-weights": [r"(?i)which is the entry itself", r"(?i)half the gradient of"],
    "l10-predict-std": [r"(?i)spares the sigmoid", r"(?i)does not starve"],
    "l25-predict-break": [r"(?i)a Python number read from a tensor"],
    "l05-predict-batchnorm": [r"(?i)the gap is as large as"],
    "l07-predict-again": [r"(?i)stops with an\s+error", r"(?i)tells backward to leave",
                          r"(?i)can be walked again"],
    "l07-predict-second": [r"(?m)^No: walking back", r"(?i)first pass needs\s+`?retain_graph"],
    "l17-predict-second": [r"(?m)^No\. By default the backward", r"(?i)but now it carries",
                           r"(?i)dy_dx`? now works"],
    "l17-predict-linear": [r"(?i)so nothing was\s+recorded"],
    "l19-predict-raises": [r"(?i)no error at all", r"(?i)trusts whatever backward returns"],
    "l13-predict-pool-tie": [r"(?i)the first maximum", r"(?i)stays with the first"],
    "l13-predict-dropout-eval": [r"(?i)returns its input itself", r"(?i)as it arrived",
                                 r"(?i)no mask was drawn"],
    # A lone 0 is everywhere in prose, and complex answers have no number form of their own.
    "l22-predict-abs": [r"(?i)\babs\W+(?:sent|sends|gives)\W+0\b"],
    "l22-predict-relu": [r"(?i)clamp\(min=0\)`?\W+(?:sends\W+|gives\W+)?1\b",
                         r"(?i)splits? the gradient evenly", r"(?i)picks its first\s+input"],
    "l22-predict-complex": [r"\b2\s*\+\s*4\s*[ij]\b", r"(?i)2\s*\+\s*4\s*i\b",
                            r"text\{grad\}_z", r"VJP is\s+`?g \* f'\(z\)\.conj\(\)",
                            r"(?i)combines the two, in torch's convention"],
    "l21-predict-first": [r"(?i)newest node is always ready"],
}


# What the answer means, read off the reveal itself rather than a list of phrasings: on
# the screen of a guess, below the guess cell, nothing may carry the reveal's own numbers
# or a run of its words, and a yes/no or zero answer may not be stated in words about the
# question's subject ("The second call works now" under "does a second backward raise?").
_STOP = set("""a an the of to in on at by for with and or but is are was were be been being it its
this that these those as from into than then so if not no yes does do did done can could will
would should has have had what which who whom whose when where how why there here each every any
all one two three your you we our their they them now just only also more most less least very
much many same other another such about after before again once up down out over under between
through while both either neither own above below started start ends end""".split())
_VERDICT = re.compile(r"(?i)\b(?:works?|worked|fails?|failed|raises?|raised|succeeds?|"
                      r"succeeded|cannot|can't|doesn't|does not|won't|stops?|explodes?|"
                      r"diverges?|converges?|breaks?|refuses?|refused)\b")
_ASKS = re.compile(r"(?i)errors?|raises?|works?|fails?|succeeds?")  # what a question asks
_ZERO = re.compile(r"(?i)\b(?:vanish\w*|zeros?)\b")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_][a-z0-9_.']*[a-z0-9_]|[a-z0-9_]", text.lower().replace("`", ""))


def _content(text: str) -> set[str]:
    return {w for w in _words(text) if w not in _STOP and len(w) >= 4}


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;:])\s+|\n\s*\n", text) if s.strip()]


def _decimals(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])(\d+\.\d+|\d+e-?\d+)(?![\w])", text))


def _meaning(prediction, answer: object, text: str) -> list[str]:
    """What in ``text`` says the answer the reveal gives (see the comment above)."""
    found = []
    why = prediction.why.replace("{answer}", " ")
    topic = {w for w in _content(prediction.question) if not _ASKS.fullmatch(w)}
    talks = [s for s in _sentences(text) if _content(s) & topic]
    for n in sorted(_decimals(why) - _decimals(prediction.question)):
        if any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", s) for s in talks):
            found.append(f"the reveal's number {n}")
    words, flat = _words(why), " ".join(_words(text))
    runs = (words[i:i + 6] for i in range(len(words) - 5))
    found += [f"the reveal's words {' '.join(r)!r}" for r in runs
              if sum(w not in _STOP and len(w) >= 3 for w in r) >= 3 and " ".join(r) in flat][:1]
    said = None
    if isinstance(answer, bool) or (isinstance(answer, str) and answer.lower() in {"yes", "no"}):
        said = _VERDICT
    elif isinstance(answer, (int, float)) and not isinstance(answer, bool) and answer == 0:
        said = _ZERO
    if said is not None:
        found += [f"the answer in words: {s.strip()[:80]!r}" for s in talks
                  if said.search(s) and not s.rstrip().endswith("?")]
    return found


def _heading(cell) -> bool:
    return heading_level(cell) is not None


def _readable(cell, above_heading: bool = False) -> str:
    """What a cell says in words: markdown as it is; of code, its comments and string
    literals (a number in an expression such as ``x ** 2`` states nothing); with
    ``above_heading``, only the markdown above the cell's first heading."""
    if cell.cell_type != "code":
        if above_heading:
            return re.split(r"(?m)^#", cell.source, maxsplit=1)[0]
        return cell.source
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(cell.source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return cell.source
    kinds = {tokenize.STRING, tokenize.COMMENT} | {
        getattr(tokenize, name) for name in ("FSTRING_MIDDLE",) if hasattr(tokenize, name)}
    return "\n".join(t.string for t in tokens if t.type in kinds)


def _on_screen(cells, guess_at: int) -> list[int]:
    """The cells a learner can read while guessing: from the question (the markdown
    cell above the guess) down to the cell holding the next heading after the reveal
    (of that cell, `_readable` keeps the text above its heading)."""
    start = max(k for k in range(guess_at) if cells[k].cell_type == "markdown")
    check = next(k for k in range(guess_at + 1, len(cells)) if cells[k].cell_type == "code")
    reveal = next(k for k in range(check + 1, len(cells)) if cells[k].cell_type == "code")
    stop = next((k for k in range(reveal + 1, len(cells)) if _heading(cells[k])), len(cells) - 1)
    return list(range(start, stop + 1))


def _screen_leaks(key: str, text: str, answer: object, choices: tuple | None,
                  below: bool = False) -> list[str]:
    """The answer's forms in ``text``; ``below`` the guess cell, also its meaning."""
    meant = _meaning(bl.course.exercises.find_prediction(key), answer, text) if below else []
    if choices is not None and all(any(re.search(f, text) for f in _forms(c)) for c in choices):
        return meant  # naming every choice gives no value away (what it says still may)
    if isinstance(answer, str) and answer.lower() in {"yes", "no"}:
        # "no" is also an ordinary word ("no dampening"): only the answer as a value counts.
        forms = [rf"[\"'`]{answer}[\"'`]", rf"(?i)\banswer is\W+{answer}\b"]
        found = [f for f in forms if re.search(f, text)]
    else:
        found = _leaks(text, answer, choices)
    return found + meant + [f for f in IN_WORDS.get(key, []) if re.search(f, text)]


def _screen_problems(lesson: Path, unfolded: bool = False) -> tuple[int, list[str]]:
    """(predictions, what states an answer) in the learner copy of `lesson`; `unfolded`
    takes the "After the reveal" folds out first, as if the lesson had none."""
    from backproplab.course import assignment as course

    copy, _ = course.learner_version(nbformat.read(lesson, as_version=4), lesson.stem)
    cells = copy.cells
    if unfolded:
        folds = {fold for fold, _ in after_reveal_folds(cells)}
        cells = [c for i, c in enumerate(cells) if i not in folds]
    found, problems = 0, []
    for i, cell in enumerate(cells):
        grade_id = str(_meta(cell).get("grade_id", ""))
        if not (_meta(cell).get("solution") and "predict" in grade_id):
            continue
        found += 1
        check = next(k for k in range(i + 1, len(cells)) if cells[k].cell_type == "code")
        key = re.search(r"bl\.check_prediction\(\s*\"([^\"]+)\"", cells[check].source).group(1)
        prediction = bl.course.exercises.find_prediction(key)
        answer = _answer_of(prediction)
        screen = _on_screen(cells, i)
        for k in screen:
            text = _readable(cells[k], above_heading=k == screen[-1] and k > i)
            leaks = _screen_leaks(key, text, answer, prediction.choices, below=k > i)
            if leaks:
                problems.append(f"{grade_id}: cell {cells[k].get('id')} states it ({leaks})")
    return found, problems


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_no_answer_on_the_screen_of_a_learner_copy(lesson):
    """In the learner's copy (as `backproplab learn` writes it, with no outputs), the
    cells from a prediction's question down to the next heading after its reveal hold
    no form of the answer: what states it belongs in the reveal's `why`, in an output
    that appears only when a cell runs, or under the next heading."""
    found, problems = _screen_problems(lesson)
    assert found, f"{lesson.name}: no prediction"
    assert not problems, f"{lesson.name}: answer on the screen before the reveal: {problems}"


@pytest.mark.parametrize("lesson", [p for p in LESSONS if p.name[:2] in {"02", "07", "13"}],
                         ids=lambda p: p.name)
def test_the_folds_are_what_keeps_those_answers_off_the_screen(lesson):
    """Without its folds, the learner copy states answers right under their reveals
    (the ways IN_WORDS keeps): the folds do the work, and the test above would see it."""
    _, problems = _screen_problems(lesson, unfolded=True)
    keys = {k for k in IN_WORDS if k.startswith(f"l{lesson.name[:2]}-")}
    stated = {k for k in keys if any(p.startswith(k) or f"{k}:" in p for p in problems)}
    assert stated, f"{lesson.name}: nothing found without the folds: {problems}"
    assert not _screen_problems(lesson)[1]


def test_the_screen_test_sees_a_spoiler():
    """The test above fails on the spoilers this course once had."""
    spoiled = nbformat.v4.new_notebook()
    spoiled.cells = [
        nbformat.v4.new_markdown_cell("### Predict, then run\n\nWhat is `x.grad`?"),
        nbformat.v4.new_code_cell('### BEGIN SOLUTION\nmax_ties_guess = [0.0, 0.5, 0.5, 0.0]\n'
                                  '### END SOLUTION'),
        nbformat.v4.new_code_cell('bl.check_prediction("l09-predict-max-ties", max_ties_guess)'),
        nbformat.v4.new_code_cell('bl.reveal("l09-predict-max-ties")'),
        nbformat.v4.new_markdown_cell("A maximum splits the gradient evenly among the ties."),
        nbformat.v4.new_code_cell('print("x.grad is", [0, 0.5, 0.5, 0])  # [0, 0.5, 0.5, 0]'),
        nbformat.v4.new_markdown_cell("## Next"),
        nbformat.v4.new_markdown_cell("It splits the gradient evenly."),
    ]
    spoiled.cells[1].metadata["nbgrader"] = {"solution": True,
                                             "grade_id": "l09-predict-max-ties"}
    on_screen = _on_screen(spoiled.cells, 1)
    assert on_screen == [0, 1, 2, 3, 4, 5, 6]
    assert _readable(spoiled.cells[6], above_heading=True) == ""
    answer = _answer_of(bl.course.exercises.find_prediction("l09-predict-max-ties"))
    said = [_screen_leaks("l09-predict-max-ties", _readable(spoiled.cells[k], k == 6), answer,
                          None) for k in on_screen]
    assert [bool(s) for s in said] == [False, False, False, False, True, True, False]
    above = nbformat.v4.new_markdown_cell("It splits the gradient evenly.\n\n### Next")
    assert _screen_leaks("l09-predict-max-ties", _readable(above, True), answer, None)
    assert not _screen_leaks("l06-predict-forgot", "and no dampening", "no", ("yes", "no"))
    assert _screen_leaks("l06-predict-forgot", 'it answers "no"', "no", ("yes", "no"))
    assert not _readable(nbformat.v4.new_code_cell("y = x ** 2"))


def test_an_order_question_tells_a_wrong_order_its_hint():
    """Where the question names its items in an order of its own (the nodes from the output
    down), the right items in another order are told to follow that order; where the order
    is what is asked (``order=True``), another order is a wrong guess, told the hint."""
    names = bl.Prediction("the nodes, from the output down", answer=lambda: ["B", "A"],
                          hint="walk from the output", why="{answer}")
    said = str(bl.course.grading.prediction_report(names, ["A", "B"]))
    assert "in another order" in said and "Hint" not in said
    order = bl.Prediction("the order the nodes run in", answer=lambda: [0, 2, 1, 3],
                          hint="a heap", why="{answer}", order=True)
    said = str(bl.course.grading.prediction_report(order, [3, 2, 1, 0]))
    assert "another order" not in said and "Hint: a heap" in said
    assert bl.course.grading.prediction_report(order, [0, 2, 1, 3]).ok
