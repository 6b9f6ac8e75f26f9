"""Every foreign name and file: transformers' (and the official TF checkpoints'); litebert never imports either library.

    names.py      config.json fields and state-dict tensor names, to and from litebert's (a declarative map)
    convert.py    transformers' weight files in and out (`load_hf`, `save_hf`), fine-tuned models as task classes
    tokenizer.py  tokenizer.json / tokenizer_config.json beside a litebert tokenizer, and transformers' flags
    tf_bundle.py  TensorFlow's checkpoint files (TensorBundle) read without TensorFlow
    tf_checkpoint.py  the official ALBERT TF checkpoints: their graph's names, `load_tf`, `convert_tf`
    directory.py  any model directory: `load`, `load_config`, `save` (litebert.load / litebert.save),
                  `import_hf`, `export_hf`

It sits above litebert.model and litebert.tokenizer; neither imports it.
"""

from litebert.hf.convert import MODEL_FILES, load_hf, model_files, read_hf_weights, save_hf
from litebert.hf.directory import export_hf, import_hf, load, load_config, read_model_config, save
from litebert.hf.names import config_from_hf, config_to_hf, from_hf_state_dict, to_hf_state_dict
from litebert.hf.tf_checkpoint import convert_tf, load_tf, tf_coverage
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
    "convert_tf",
    "copy_tokenizer_with_hf_files",
    "export_hf",
    "from_hf_state_dict",
    "import_hf",
    "load",
    "load_config",
    "load_hf",
    "load_tf",
    "load_tokenizer",
    "model_files",
    "read_hf_weights",
    "read_model_config",
    "save",
    "save_hf",
    "tf_coverage",
    "to_hf_state_dict",
    "write_hf_tokenizer_files",
]
