"""Every transformers name and file: the one place litebert speaks Hugging Face (it never imports transformers).

    names.py      config.json fields and state-dict tensor names, to and from litebert's (a declarative map)
    convert.py    transformers' weight files in and out (`load_hf`, `save_hf`), fine-tuned models as task classes
    tokenizer.py  tokenizer.json / tokenizer_config.json beside a litebert tokenizer, and transformers' flags
    directory.py  any model directory: `load`, `load_config`, `save` (litebert.load / litebert.save),
                  `import_hf`, `export_hf`

It sits above litebert.model and litebert.tokenizer; neither imports it.
"""

from litebert.hf.convert import load_hf, read_hf_weights, save_hf
from litebert.hf.directory import (
    MODEL_FILES,
    export_hf,
    import_hf,
    load,
    load_config,
    model_files,
    read_model_config,
    save,
)
from litebert.hf.names import config_from_hf, config_to_hf, from_hf_state_dict, to_hf_state_dict
from litebert.hf.tokenizer import (
    HF_TOKENIZER_FILES,
    build_hf_tokenizer,
    copy_tokenizer_with_hf_files,
    load_tokenizer,
    write_hf_tokenizer_files,
)

__all__ = [
    "HF_TOKENIZER_FILES",
    "MODEL_FILES",
    "build_hf_tokenizer",
    "config_from_hf",
    "config_to_hf",
    "copy_tokenizer_with_hf_files",
    "export_hf",
    "from_hf_state_dict",
    "import_hf",
    "load",
    "load_config",
    "load_hf",
    "load_tokenizer",
    "model_files",
    "read_hf_weights",
    "read_model_config",
    "save",
    "save_hf",
    "to_hf_state_dict",
    "write_hf_tokenizer_files",
]
