"""Model config files shipped in data/models/ and their loading into transformers configs.

`load_config` is the only way dooly turns a config file into a `transformers.PretrainedConfig`: it checks the JSON,
the `model_type` and the `architectures` entry, and says which file and field is wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

__all__ = ["ConfigError", "models_dir", "load_config", "check_sizes", "list_models", "model_path", "tiny_path"]

# data/models/ of the repository this package lives in; DOOLY_MODELS_DIR overrides it (e.g. an installed package).
_REPO_MODELS_DIR = Path(__file__).resolve().parents[2] / "data" / "models"


class ConfigError(ValueError):
    """A model config file that cannot be turned into a transformers config. The message names the file, the field
    and the fix."""


def models_dir() -> Path:
    """The folder holding the shipped configs (`<name>.json`) and their tiny variants (`tiny/<name>.json`)."""
    return Path(os.environ.get("DOOLY_MODELS_DIR", _REPO_MODELS_DIR))


def list_models() -> list[str]:
    """Names of the shipped full-size configs (file stems in data/models/), sorted."""
    return sorted(p.stem for p in models_dir().glob("*.json"))


def model_path(name: str) -> Path:
    """Path of the full-size config `name` (e.g. "llama-3.1-8b")."""
    return _existing(models_dir() / f"{name}.json", name, "")


def tiny_path(name: str) -> Path:
    """Path of the tiny variant of `name`: same architecture, small dimensions, for CPU tests."""
    return _existing(models_dir() / "tiny" / f"{name}.json", name, "tiny ")


def _existing(path: Path, name: str, kind: str) -> Path:
    if not path.is_file():
        known = list_models()
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"No {kind}model config named '{name}' ({path} does not exist).{hint} "
                          f"Known models: {', '.join(known) or '(none)'}.")
    return path


def load_config(path: str | os.PathLike):
    """Reads a Hugging Face style config.json and returns the matching `transformers.PretrainedConfig` subclass.

    Raises `ConfigError` naming the file and the field (malformed JSON with line and column, a missing or unknown
    `model_type`, missing or bad sizes (check_sizes), an `architectures` entry transformers does not know or that
    does not match `model_type`)."""
    from transformers import CONFIG_MAPPING  # late: importing transformers takes seconds

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the model config ({e.strerror}). Pass the path of an existing "
                          f"config.json, e.g. one from data/models/.") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}). A config.json is UTF-8 JSON; re-save the "
                          f"file as UTF-8.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}. Fix the file so "
                          f"that it is one JSON object (a Hugging Face config.json).") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level is a JSON {type(data).__name__}, not an object. A model config is "
                          f"one JSON object of config.json keys.")

    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(f"{path}: field 'model_type' is missing or not a string. Add the Hugging Face model type, "
                          f"e.g. \"model_type\": \"llama\".")
    if model_type not in CONFIG_MAPPING:
        close = difflib.get_close_matches(model_type, list(CONFIG_MAPPING.keys()), n=3)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        import transformers
        raise ConfigError(f"{path}: field 'model_type' = '{model_type}' is not a model type known to transformers "
                          f"{transformers.__version__}.{hint} Use one of transformers' model types, or a "
                          f"transformers version that has this model.")
    config_class = CONFIG_MAPPING[model_type]
    check_sizes(text, path)
    _check_architectures(path, data, model_type, config_class)

    try:
        return config_class.from_dict(data)
    except Exception as e:  # transformers validates fields (types, ranges) in the config constructors
        raise ConfigError(f"{path}: transformers rejects this {config_class.__name__}: {e}. Fix the named field "
                          f"(compare with data/models/ for a valid example).") from e


def check_sizes(text: str, source) -> dict:
    """The core's checks of a config's sizes (dooly::trace::check_model_config): a missing hidden_size or
    vocab_size (transformers would use its defaults, 4096 / 32000: another model), sizes that are not positive
    integers or are absurd, KV heads that do not divide the heads, a hidden_size the heads do not divide. Returns
    the checked values; raises ConfigError naming the file and the field, before anything is built."""
    try:
        import dooly_core
    except ImportError as e:
        raise ImportError("the compiled core `dooly_core` is not importable. Build it (scripts/build.sh default "
                          "dooly_core) and put build/default/python on PYTHONPATH.") from e
    try:
        return dooly_core.check_model_config(text, str(source))
    except dooly_core.InputError as e:
        raise ConfigError(str(e)) from None


def _check_architectures(path: Path, data: dict, model_type: str, config_class) -> None:
    archs = data.get("architectures")
    if archs is None:
        return  # optional: the model class then comes from model_type alone
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise ConfigError(f"{path}: field 'architectures' must be a non-empty list of class names, e.g. "
                          f"[\"LlamaForCausalLM\"], or be left out.")
    import transformers
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    arch = archs[0]
    if not hasattr(transformers, arch):
        raise ConfigError(f"{path}: field 'architectures' names '{arch}', which transformers "
                          f"{transformers.__version__} does not have. Use the class name of a causal LM in "
                          f"transformers (e.g. LlamaForCausalLM), or remove the field.")
    try:
        causal_lm = MODEL_FOR_CAUSAL_LM_MAPPING[config_class]
    except KeyError:
        raise ConfigError(f"{path}: model_type '{model_type}' has no causal language model in transformers "
                          f"{transformers.__version__}; dooly needs a *ForCausalLM architecture.") from None
    if causal_lm.__name__ != arch:
        raise ConfigError(f"{path}: field 'architectures' names '{arch}' but model_type '{model_type}' builds "
                          f"'{causal_lm.__name__}'. Make the two agree (set architectures to "
                          f"[\"{causal_lm.__name__}\"] or fix model_type).")
