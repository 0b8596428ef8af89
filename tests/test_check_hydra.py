"""Hydra override grammar and applying overrides to verl's defaults."""

from __future__ import annotations

import math

import pytest

from logscope import hydra_overrides as hydra
from logscope.exceptions import ConfigParseError


@pytest.mark.parametrize(
    "token, op, key, value",
    [
        ("data.train_batch_size=512", "set", "data.train_batch_size", 512),
        ("+trainer.seed=42", "add", "trainer.seed", 42),
        ("++data.seed=7", "force_add", "data.seed", 7),
        ("~trainer.logger", "delete", "trainer.logger", None),
        ("~trainer.total_epochs=30", "delete", "trainer.total_epochs", 30),
        ("trainer.logger=['console','wandb']", "set", "trainer.logger", ["console", "wandb"]),
        ("trainer.logger=[console,wandb]", "set", "trainer.logger", ["console", "wandb"]),
        ("trainer.logger=[]", "set", "trainer.logger", []),
        ("x=[1, 2.5, null, true]", "set", "x", [1, 2.5, None, True]),
        ("x={a:1,b:[x,y]}", "set", "x", {"a": 1, "b": ["x", "y"]}),
        ("x='a,b'", "set", "x", "a,b"),
        ('x="quoted string"', "set", "x", "quoted string"),
        ("x='it\\'s'", "set", "x", "it's"),
        ("actor_rollout_ref.actor.optim.lr=1e-6", "set", "actor_rollout_ref.actor.optim.lr", 1e-6),
        ("x=1.5e-6", "set", "x", 1.5e-6),
        ("x=-3", "set", "x", -3),
        ("x=.5", "set", "x", 0.5),
        ("x=1_000", "set", "x", 1000),
        ("x=true", "set", "x", True),
        ("x=False", "set", "x", False),
        ("x=TRUE", "set", "x", True),
        ("x=null", "set", "x", None),
        ("x=", "set", "x", ""),
        ("x=/models/Qwen2.5-7B-Instruct", "set", "x", "/models/Qwen2.5-7B-Instruct"),
        (
            "x=${oc.select:data.max_response_length,512}",
            "set",
            "x",
            "${oc.select:data.max_response_length,512}",
        ),
        ("x=$UNSET", "set", "x", "$UNSET"),
        ("x=${UNSET}", "set", "x", "${UNSET}"),
        ("a.b@pkg=1", "set", "a.b@pkg", 1),
    ],
)
def test_override_grammar(token, op, key, value):
    ov = hydra.parse_override(token)
    assert (ov.op, ov.key) == (op, key)
    assert ov.value == value
    assert type(ov.value) is type(value)


def test_special_floats():
    assert hydra.parse_value("inf") == math.inf
    assert hydra.parse_value("-inf") == -math.inf
    assert math.isnan(hydra.parse_value("nan"))


@pytest.mark.parametrize(
    "token, fragment",
    [
        ("trainer.logger=console,wandb", "sweep"),
        ("=5", "missing key"),
        ("just_a_word", "no '='"),
        ("a b=1", "invalid key"),
        ("x=[1,2", "unclosed ["),
        ("x={a:1", "unclosed {"),
        ("x='abc", "unterminated"),
        ("x=[a]]", "unexpected"),
    ],
)
def test_unparseable_overrides_name_the_token(token, fragment):
    with pytest.raises(ConfigParseError) as info:
        hydra.parse_override(token)
    assert info.value.token == token
    assert fragment in str(info.value)
    assert repr(token) in str(info.value)


def test_flags_and_passthrough():
    args = hydra.parse_args(
        ["--config-path=config", "--config-name", "my_ppo", "-cn=other", "a=1", "$@"]
    )
    assert args.config_path == "config"
    assert args.config_name == "other"  # the later flag wins, as in Hydra
    assert [o.key for o in args.overrides] == ["a"]
    assert args.passthrough == ["$@"]
    with pytest.raises(ConfigParseError) as info:
        hydra.parse_args(["--no-such-flag"])
    assert info.value.token == "--no-such-flag"
    with pytest.raises(ConfigParseError):
        hydra.parse_args(["--config-name"])


def test_apply_onto_verl_defaults():
    base = hydra.defaults_config()
    assert base["data"]["train_batch_size"] == 1024  # verl 0.9.1 default
    overrides = [
        hydra.parse_override(t)
        for t in (
            "data.train_batch_size=512",
            "+new.key=1",
            "++data.seed=3",
            "~trainer.seed",
            "actor_rollout_ref/rollout=sglang",  # a config-group choice, not a value
        )
    ]
    out = hydra.apply(base, overrides)
    assert out["data"]["train_batch_size"] == 512
    assert out["new"]["key"] == 1
    assert out["data"]["seed"] == 3
    assert "seed" not in out["trainer"]
    assert base["data"]["train_batch_size"] == 1024  # input untouched


def test_versioned_defaults():
    old = hydra.defaults_config("0.3")
    new = hydra.defaults_config("0.9.1")
    assert old["actor_rollout_ref"]["rollout"]["enforce_eager"] is True
    assert new["actor_rollout_ref"]["rollout"]["enforce_eager"] is False


def test_interpolations_resolve_simple_forms():
    config = {
        "data": {"max_response_length": 256},
        "actor_rollout_ref": {
            "rollout": {
                "response_length": "${oc.select:data.max_response_length,512}",
                "prompt_length": "${oc.select:data.max_prompt_length,512}",
                "other": "${data.max_response_length}",
                "relative": "${.x}",
            }
        },
    }
    hydra.resolve_interpolations(config)
    rollout = config["actor_rollout_ref"]["rollout"]
    assert rollout["response_length"] == 256
    assert rollout["prompt_length"] == 512  # oc.select default when the key is absent
    assert rollout["other"] == 256
    assert rollout["relative"] == "${.x}"


def test_dotted_yaml_keys_expand():
    assert hydra.from_dotted({"data.train_batch_size": 8, "data": {"shuffle": False}}) == {
        "data": {"train_batch_size": 8, "shuffle": False}
    }
