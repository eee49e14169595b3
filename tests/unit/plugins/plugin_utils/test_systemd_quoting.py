# SPDX-License-Identifier: Apache-2.0
"""systemd_quote: property tests against a reference parser of systemd's command-line rules.

The reference parser follows systemd.syntax(7) ("Quoting") and systemd.service(5) ("Command
lines"), in the order systemd applies them to ExecStart=:

1. a lone unquoted ";" separates commands (refused here: one command only);
2. words are split on whitespace; a word may mix unquoted text and "double" or 'single' quoted
   parts; inside and outside quotes the C escapes \\a \\b \\f \\n \\r \\t \\v \\\\ \\" \\' \\s
   \\xhh \\nnn \\uhhhh \\Uhhhhhhhh are decoded;
3. on the first word the prefixes "-", "@", ":", "+", "!" (and "!!") are consumed even after
   unquoting;
4. specifiers are expanded in every word: "%%" is "%", "%" followed by anything else is a
   specifier;
5. at execution, environment variables are expanded: "$$" is "$", "${NAME}" and a "$NAME" word
   are references.

Steps 4 and 5 raise instead of expanding, so a round trip proves that no specifier or variable
reference survives quoting.
"""

import pytest
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import checks
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import argv as render_argv
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import systemd as render_systemd
from hypothesis import given
from hypothesis import strategies as st

WHITESPACE = " \t\n\r"
SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


class SpecifierUsed(Exception):
    pass


class VariableUsed(Exception):
    pass


class Separator(Exception):
    pass


def _unescape(text, i):
    """Decode the escape at text[i] (just after the backslash); return (char, next index)."""
    ch = text[i]
    if ch in SIMPLE_ESCAPES:
        return SIMPLE_ESCAPES[ch], i + 1
    for lead, width, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
        if ch == lead:
            return chr(int(text[i + 1 : i + 1 + width], base)), i + 1 + width
    if ch in "01234567":
        return chr(int(text[i : i + 3], 8)), i + 3
    raise ValueError("invalid escape \\" + ch)


def split_words(line):
    words = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        if line[i] == ";" and (i + 1 == n or line[i + 1] in WHITESPACE):
            raise Separator(line)
        word = []
        quote = None
        while i < n:
            ch = line[i]
            if quote is None and ch in WHITESPACE:
                break
            if ch == "\\":
                decoded, i = _unescape(line, i + 1)
                word.append(decoded)
                continue
            if quote is None and ch in "\"'":
                quote = ch
            elif ch == quote:
                quote = None
            else:
                word.append(ch)
            i += 1
        if quote is not None:
            raise ValueError("unterminated quote")
        words.append("".join(word))


def expand_specifiers(word):
    out = []
    i = 0
    while i < len(word):
        if word[i] == "%":
            if i + 1 < len(word) and word[i + 1] == "%":
                out.append("%")
                i += 2
                continue
            raise SpecifierUsed(word)
        out.append(word[i])
        i += 1
    return "".join(out)


def expand_variables(word):
    out = []
    i = 0
    while i < len(word):
        if word[i] == "$":
            if i + 1 < len(word) and word[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if i + 1 < len(word) and (word[i + 1] == "{" or word[i + 1].isalpha() or word[i + 1] == "_"):
                raise VariableUsed(word)
            # a lone "$" not followed by a name is kept by systemd
            out.append("$")
            i += 1
            continue
        out.append(word[i])
        i += 1
    return "".join(out)


def parse_exec(line):
    words = split_words(line)
    if not words:
        raise ValueError("empty command line")
    first = words[0]
    if first.startswith(("-", "@", ":", "+", "!")):
        raise ValueError("executable prefix on the first word: " + first)
    return [expand_variables(expand_specifiers(word)) for word in words]


# ---------------------------------------------------------------- the reference parser itself


def test_reference_parser_knows_systemds_rules():
    assert parse_exec('/bin/echo "a b" c\\x41 \'d e\' "\\"q\\"" %%') == ["/bin/echo", "a b", "cA", "d e", '"q"', "%"]
    assert parse_exec("/bin/echo $$HOME a$ $") == ["/bin/echo", "$HOME", "a$", "$"]
    with pytest.raises(SpecifierUsed):
        parse_exec("/bin/echo %n")
    with pytest.raises(VariableUsed):
        parse_exec("/bin/echo $HOME")
    with pytest.raises(VariableUsed):
        parse_exec('/bin/echo "${HOME}"')
    with pytest.raises(Separator):
        parse_exec("/bin/true ; /bin/false")
    with pytest.raises(ValueError):
        parse_exec('-"/bin/true"')
    # a quoted semicolon is an ordinary word
    assert parse_exec('/bin/echo ";"') == ["/bin/echo", ";"]


# ---------------------------------------------------------------- examples


def test_plain_argv():
    argv = ["/usr/bin/vllm", "serve", "--config", "/etc/vllm/serve.yaml"]
    assert render_systemd.systemd_quote(argv) == '"/usr/bin/vllm" "serve" "--config" "/etc/vllm/serve.yaml"'


def test_specials_are_escaped_and_doubled():
    quoted = render_systemd.systemd_quote(["/bin/echo", 'say "hi"', "C:\\dir", "100%", "$HOME", "${X}", ";", "'"])
    assert quoted == '"/bin/echo" "say \\"hi\\"" "C:\\\\dir" "100%%" "$$HOME" "$${X}" ";" "\'"'
    assert parse_exec(quoted) == ["/bin/echo", 'say "hi"', "C:\\dir", "100%", "$HOME", "${X}", ";", "'"]


def test_integers_become_words():
    assert render_systemd.systemd_quote(["/bin/sleep", 5]) == '"/bin/sleep" "5"'


def test_a_real_container_argv_round_trips():
    serve = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_memory_utilization": 0.75,
        "family": "thor",
        "env_file": "/etc/vllm/vllm.env",
    }
    argv = render_argv.serve_argv(serve, "/etc/vllm/serve.yaml", "docker", image="vllm/vllm-openai:v0.20.2")
    assert parse_exec(render_systemd.systemd_quote(argv)) == argv


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "argv=[] is not allowed; expected a non-empty list of strings"),
        ("vllm serve", "argv='vllm serve' is not allowed"),
        (["/bin/echo", ""], "argv[1]='' is not allowed; expected a non-empty string"),
        (["/bin/echo", "a\nb"], "argv[1]='a\\nb' is not allowed; expected a string without control characters"),
        (["/bin/echo", "a\x00b"], "argv[1]='a\\x00b' is not allowed"),
        (["/bin/echo", "a\x7fb"], "argv[1]='a\\x7fb' is not allowed"),
        (["/bin/echo", "a\x85b"], "argv[1]='a\\x85b' is not allowed"),
        (["/bin/echo", "\ud800"], "argv[1]='\\ud800' is not allowed"),
        (["/bin/echo", None], "argv[1]=None is not allowed; expected a string"),
        (["/bin/echo", True], "argv[1]=True is not allowed; expected a string"),
        (["-/bin/true"], "argv[0]='-/bin/true' is not allowed"),
        (["@/bin/true", "x"], "argv[0]='@/bin/true' is not allowed"),
        ([":/bin/true"], "argv[0]=':/bin/true' is not allowed"),
        (["+/bin/true"], "argv[0]='+/bin/true' is not allowed"),
        (["!/bin/true"], "argv[0]='!/bin/true' is not allowed"),
        ([";", "x"], "argv[0]=';' is not allowed"),
    ],
)
def test_refused(argv, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        render_systemd.systemd_quote(argv, host="jetson-012")
    assert str(excinfo.value).startswith("host jetson-012: " + fragment), str(excinfo.value)


# ---------------------------------------------------------------- properties

PRINTABLE = st.characters(blacklist_categories=("Cc", "Cs"))
WORD = st.text(alphabet=PRINTABLE, min_size=1, max_size=30)
FIRST = WORD.filter(lambda w: not w.startswith(("-", "@", ":", "+", "!")) and w != ";")


@given(FIRST, st.lists(WORD, max_size=8))
def test_round_trip_through_the_reference_parser(first, rest):
    argv = [first, *rest]
    quoted = render_systemd.systemd_quote(argv)
    assert parse_exec(quoted) == argv


@given(FIRST, st.lists(WORD, max_size=8))
def test_no_word_can_become_a_specifier_or_a_variable(first, rest):
    quoted = render_systemd.systemd_quote([first, *rest])
    assert "%" not in quoted.replace("%%", "")
    assert "$" not in quoted.replace("$$", "")
    # every word is one double-quoted token: the line never ends inside an escape or a quote
    assert quoted.startswith('"') and quoted.endswith('"')
    assert "\n" not in quoted


@given(st.text(alphabet="%$\\\"' ;ab", min_size=1, max_size=20))
def test_dense_special_characters_round_trip(word):
    argv = ["/bin/echo", word]
    assert parse_exec(render_systemd.systemd_quote(argv)) == argv


@given(
    st.lists(WORD, min_size=1, max_size=5),
    st.integers(min_value=0, max_value=4),
    st.sampled_from(["\n", "\r", "\t", "\x00", "\x1b", "\x7f"]),
)
def test_any_control_character_is_refused(words, index, control):
    index = min(index, len(words) - 1)
    argv = ["/bin/echo", *words]
    argv[index + 1] = argv[index + 1] + control
    with pytest.raises(checks.SpecdecError, match="without control characters"):
        render_systemd.systemd_quote(argv)


@given(FIRST, st.lists(WORD, max_size=4))
def test_quoting_is_deterministic(first, rest):
    assert render_systemd.systemd_quote([first, *rest]) == render_systemd.systemd_quote([first, *rest])
