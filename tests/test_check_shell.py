"""Shell parsing of launch scripts: one test per syntax the brief lists, and the errors."""

from __future__ import annotations

import pytest

from logscope.check.shell import find_verl, join_command, parse_script, verl_commands
from logscope.exceptions import ConfigParseError


def only_verl(text: str, env: dict[str, str] | None = None):
    found = verl_commands(text, env=env)
    assert len(found) == 1, found
    return found[0]


def test_line_continuations_join_one_command():
    cmd = only_verl("python3 -m verl.trainer.main_ppo \\\n  a.b=1 \\\n  c=2\n")
    assert cmd.args == ["a.b=1", "c=2"]
    assert cmd.line == 1


def test_quotes_are_removed_like_a_shell_does():
    cmd = only_verl(
        """python3 -m verl.trainer.main_ppo trainer.logger=['console','wandb'] """
        """"trainer.experiment_name=my run" 'x=a b' y=\\$HOME"""
    )
    # single quotes inside a word are shell quotes: Hydra receives [console,wandb]
    assert cmd.args == [
        "trainer.logger=[console,wandb]",
        "trainer.experiment_name=my run",
        "x=a b",
        "y=$HOME",
    ]


def test_comments_are_ignored_but_hash_inside_words_is_kept():
    cmd = only_verl("# launch\npython3 -m verl.trainer.main_ppo a=1 # trailing\n# b=2\n")
    assert cmd.args == ["a=1"]
    cmd = only_verl("python3 -m verl.trainer.main_ppo tag=x#1")
    assert cmd.args == ["tag=x#1"]


def test_variables_assigned_in_the_script_are_substituted():
    text = (
        "MODEL=/models/Qwen2.5-7B-Instruct\n"
        "export N=8\n"
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=$MODEL "
        'actor_rollout_ref.rollout.n=${N} data.x="${MODEL}/tok"\n'
    )
    cmd = only_verl(text)
    assert cmd.args == [
        "actor_rollout_ref.model.path=/models/Qwen2.5-7B-Instruct",
        "actor_rollout_ref.rollout.n=8",
        "data.x=/models/Qwen2.5-7B-Instruct/tok",
    ]


def test_unset_variables_stay_symbolic_and_defaults_apply():
    cmd = only_verl(
        "python3 -m verl.trainer.main_ppo a=$UNSET_VAR b=${ALSO_UNSET} c=${N:-4} d='$LITERAL'"
    )
    assert cmd.args == ["a=$UNSET_VAR", "b=${ALSO_UNSET}", "c=4", "d=$LITERAL"]


def test_environment_is_used_only_when_given():
    text = "python3 -m verl.trainer.main_ppo a=$HOME"
    assert only_verl(text).args == ["a=$HOME"]
    assert only_verl(text, env={"HOME": "/root"}).args == ["a=/root"]


def test_unquoted_expansion_splits_into_words():
    text = 'ARGS="a=1 b=2"\npython3 -m verl.trainer.main_ppo $ARGS "c=$ARGS"'
    assert only_verl(text).args == ["a=1", "b=2", "c=a=1 b=2"]


def test_several_commands_and_operators():
    text = (
        "set -e; cd /work && python3 -m verl.trainer.main_ppo a=1 || echo failed\n"
        "python -m verl.trainer.main_ppo b=2 & wait\n"
    )
    found = verl_commands(text)
    assert [c.args for c in found] == [["a=1"], ["b=2"]]
    assert [c.line for c in found] == [1, 2]
    argvs = [c.argv for c in parse_script(text)]
    assert ["echo", "failed"] in argvs and ["wait"] in argvs


def test_pipes_and_redirections_are_not_arguments():
    found = verl_commands(
        "python3 -m verl.trainer.main_ppo a=1 2>&1 | tee verl_demo.log\n"
        "python3 -m verl.trainer.main_ppo b=2 > out.log 2> err.log &> all.log\n"
    )
    assert [c.args for c in found] == [["a=1"], ["b=2"]]


def test_env_prefixes_are_kept_separately():
    cmd = only_verl("PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1 python3 -m verl.trainer.main_ppo a=1")
    assert cmd.env == {"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "1"}
    assert cmd.prefix == ["python3", "-m", "verl.trainer.main_ppo"]
    # an env prefix does not set a script variable
    found = verl_commands("A=1 true\npython3 -m verl.trainer.main_ppo x=$A")
    assert found[0].args == ["x=$A"]


@pytest.mark.parametrize(
    "launcher, entry",
    [
        ("python -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
        ("python3 -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
        ("/usr/bin/python3.10 -u -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
        ("python3 -m recipe.dapo.main_dapo", "recipe.dapo.main_dapo"),
        ("python3 verl/trainer/main_ppo.py", "verl/trainer/main_ppo.py"),
        ("torchrun --nproc_per_node=8 -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
        (
            "ray job submit --address=http://127.0.0.1:8265 --runtime-env=r.yaml --no-wait "
            "-- python3 -m verl.trainer.main_ppo",
            "verl.trainer.main_ppo",
        ),
        ("uv run python -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
        ("nohup python3 -m verl.trainer.main_ppo", "verl.trainer.main_ppo"),
    ],
)
def test_verl_entry_points_are_found_behind_launchers(launcher, entry):
    cmd = only_verl(f"{launcher} data.train_batch_size=512")
    assert cmd.entry == entry
    assert cmd.args == ["data.train_batch_size=512"]


def test_non_trainer_verl_modules_are_not_linted():
    assert verl_commands("python3 -m verl.trainer.main_generation a=1") == []
    assert verl_commands("python3 -m verl.trainer.fsdp_sft_trainer a=1") == []
    assert verl_commands("python3 examples/data_preprocess/gsm8k.py") == []


def test_bash_dash_c_is_parsed_inside():
    cmd = only_verl("bash -c 'python3 -m verl.trainer.main_ppo a=1 b=\"x y\"'")
    assert cmd.args == ["a=1", "b=x y"]


def test_loop_and_if_bodies_are_found():
    text = "for n in 4 8; do\n  python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=$n\ndone\n"
    cmd = only_verl(text)
    assert cmd.args == ["actor_rollout_ref.rollout.n=$n"]  # loop variables stay symbolic
    text = "if true; then python3 -m verl.trainer.main_ppo a=1; fi"
    assert only_verl(text).args == ["a=1"]


@pytest.mark.parametrize(
    "text, token",
    [
        ("python3 -m verl.trainer.main_ppo a='unclosed", "a='unclosed"),
        ('python3 -m verl.trainer.main_ppo a="unclosed', 'a="unclosed'),
        ("python3 -m verl.trainer.main_ppo a=${UNCLOSED", "a=${UNCLOSED"),
        ("python3 -m verl.trainer.main_ppo a=1 >", ">"),
    ],
)
def test_unparseable_shell_raises_with_the_token(text, token):
    with pytest.raises(ConfigParseError) as info:
        verl_commands(text, path="run.sh")
    assert info.value.token == token
    assert "run.sh:1" in str(info.value)


def test_find_verl_on_argv_and_join_round_trip():
    argv = ["python3", "-m", "verl.trainer.main_ppo", "trainer.logger=[console]", "x=a b"]
    from logscope.check.shell import Command

    cmd = find_verl(Command(argv))
    assert cmd is not None and cmd.args == argv[3:]
    again = verl_commands(join_command(argv))
    assert again[0].argv == argv


# ---- robustness ---------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SHELLISH = st.text(
    alphabet=st.sampled_from(list("ab=.-_ $'\"\\{}()[]|&;<>#\n\t12~+:,`")), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(_SHELLISH)
def test_any_text_parses_or_raises_config_parse_error(text):
    try:
        verl_commands("python3 -m verl.trainer.main_ppo " + text)
    except ConfigParseError as exc:
        assert exc.token is not None or exc.path is not None or str(exc)


@settings(max_examples=300, deadline=None)
@given(_SHELLISH)
def test_any_override_parses_or_raises_config_parse_error(text):
    from logscope.hydra_overrides import parse_override

    try:
        parse_override(text)
    except ConfigParseError as exc:
        assert exc.token == text


def test_arithmetic_expansion_and_command_substitution():
    text = (
        "max_prompt_length=2048\nmax_response_length=4096\n"
        "tok=$(((max_prompt_length + max_response_length) * 3))\n"
        "STAMP=$(date +%Y%m%d-%H%M)\n"
        "python3 -m verl.trainer.main_ppo a=${tok} b=$((7 / 2)) c=$((-7 % 3)) "
        "d=$((UNKNOWN + 1)) e=run_$STAMP f=`hostname`\n"
    )
    cmd = only_verl(text)
    # bash: 6144 × 3, integer division truncating toward zero, C-style modulo
    assert cmd.args == [
        "a=18432",
        "b=3",
        "c=-1",
        "d=$((UNKNOWN + 1))",  # unknown names: kept symbolic
        "e=run_$(date +%Y%m%d-%H%M)",  # a substitution in a value stays one word
        "f=`hostname`",
    ]


# ---- source positions (for `--fix`, which edits the script in place) ---------------------------


def test_each_argument_knows_the_source_text_it_came_from():
    text = (
        "set -x\nexport A=1\nEXTRA='x=1 y=2'\n"
        "python3 -m verl.trainer.main_ppo \\\n"
        "    a.b=1 \\\n"
        "    'c.d=two words' $EXTRA \\\n"
        '    "$@" 2>&1 | tee verl.log\n'
    )
    cmd = only_verl(text)
    assert cmd.args == ["a.b=1", "c.d=two words", "x=1", "y=2", "$@"]
    raw = [text[s.start : s.end] for s in cmd.spans]
    assert raw == ["a.b=1", "'c.d=two words'", "$EXTRA", "$EXTRA", '"$@"']
    assert [s.solo for s in cmd.spans] == [True, True, False, False, True]
    assert text[cmd.entry_span.start : cmd.entry_span.end] == "verl.trainer.main_ppo"


def test_positions_inside_bash_dash_c_map_to_the_outer_text():
    text = "bash -c 'python3 -m verl.trainer.main_ppo a=1 b=2'\n"
    cmd = only_verl(text)
    assert [text[s.start : s.end] for s in cmd.spans] == ["a=1", "b=2"]
    assert cmd.quoting == "'"
    double = only_verl('bash -c "python3 -m verl.trainer.main_ppo a=1"\n')
    assert double.spans == [None]  # escapes shift offsets: not editable in place
