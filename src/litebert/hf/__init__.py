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

from __future__ import annotations

from typing import TYPE_CHECKING

from litebert.io.exports import lazy_exports

if TYPE_CHECKING:
    from litebert.hf.convert import MODEL_FILES, load_hf, model_files, read_hf_weights, save_hf
    from litebert.hf.directory import (
        ConvertConfig,
        convert_model,
        export_hf,
        import_hf,
        load,
        load_config,
        read_model_config,
        save,
    )
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
    "ConvertConfig",
    "build_hf_tokenizer",
    "config_from_hf",
    "config_to_hf",
    "convert_model",
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

# Imported on first use (litebert.io.exports): importing one module of the package imports no other.
__getattr__ = lazy_exports(
    __name__,
    {
        "MODEL_FILES": "litebert.hf.convert",
        "load_hf": "litebert.hf.convert",
        "model_files": "litebert.hf.convert",
        "read_hf_weights": "litebert.hf.convert",
        "save_hf": "litebert.hf.convert",
        "ConvertConfig": "litebert.hf.directory",
        "convert_model": "litebert.hf.directory",
        "export_hf": "litebert.hf.directory",
        "import_hf": "litebert.hf.directory",
        "load": "litebert.hf.directory",
        "load_config": "litebert.hf.directory",
        "read_model_config": "litebert.hf.directory",
        "save": "litebert.hf.directory",
        "config_from_hf": "litebert.hf.names",
        "config_to_hf": "litebert.hf.names",
        "from_hf_state_dict": "litebert.hf.names",
        "to_hf_state_dict": "litebert.hf.names",
        "convert_tf": "litebert.hf.tf_checkpoint",
        "load_tf": "litebert.hf.tf_checkpoint",
        "tf_coverage": "litebert.hf.tf_checkpoint",
        "HF_TOKENIZER_FILES": "litebert.hf.tokenizer",
        "build_hf_tokenizer": "litebert.hf.tokenizer",
        "copy_tokenizer_with_hf_files": "litebert.hf.tokenizer",
        "load_tokenizer": "litebert.hf.tokenizer",
        "write_hf_tokenizer_files": "litebert.hf.tokenizer",
    },
)
