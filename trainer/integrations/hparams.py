"""TensorBoard's HParams plugin data, written into a run's own folder: a session's hyperparameters and its end.

torch's `SummaryWriter.add_hparams` puts them in a new sub-folder (a second run beside the curves) and
`torch.utils.tensorboard.summary.hparams` turns booleans into numbers; these write the plugin's protobufs directly.
Imported only by code that writes TensorBoard events: tensorboard is an optional package.
"""

from __future__ import annotations

import json
from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

# a session's status in the HParams view (tensorboard.plugins.hparams.api_pb2.Status)
STATUS = {"success": "STATUS_SUCCESS", "failure": "STATUS_FAILURE", "aborted": "STATUS_ABORTED"}


def hparam_value(value: Any) -> bool | int | float | str:
    """A value TensorBoard's HParams plugin takes: numbers, strings and booleans as they are, anything else as text."""
    if isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, default=str) if isinstance(value, dict | list | tuple) else str(value)


def write_hparams(writer: Any, hparams: dict[str, Any]) -> None:
    """The session's hyperparameters, written into the writer's own run folder (booleans stay booleans: torch's
    `hparams()` turns them into numbers)."""
    start = plugin_data_pb2.SessionStartInfo()
    for name, value in hparams.items():
        value = hparam_value(value)
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, str):
            start.hparams[name].string_value = value
        else:
            start.hparams[name].number_value = value
    _write_plugin_data(
        writer, metadata.SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_start_info=start)
    )


def write_session_end(writer: Any, status: str) -> None:
    """The session's end with its status ("success", "failure", "aborted"), which the HParams view shows and filters."""
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value(STATUS[status]))
    _write_plugin_data(
        writer, metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end)
    )


def write_experiment(writer: Any, hparams: list[str], metrics: list[str]) -> None:
    """Which hyperparameters and metrics the HParams view shows as columns (without it, every scalar of every run is a
    column). Every run of a study writes the same one: the view takes the first it finds."""
    experiment = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=name) for name in hparams],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metrics],
    )
    _write_plugin_data(
        writer, metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)
    )


def _write_plugin_data(writer: Any, tag: str, data: Any) -> None:
    data.version = metadata.PLUGIN_DATA_VERSION
    plugin = SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString())
    value = Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin))
    writer.file_writer.add_summary(Summary(value=[value]))
