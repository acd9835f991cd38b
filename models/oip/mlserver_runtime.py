"""bertqa's test models as an MLServer custom runtime (models/oip/mlserver/*/
model-settings.json name it; scripts/testbed/oip_server.sh starts the server). The model's
parameters.extra.model names its entry in qa_oip.MODELS."""
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

import qa_oip


class QARuntime(MLModel):
    async def load(self) -> bool:
        self._logits = qa_oip.logits_for(self.settings.parameters.extra["model"])
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
        out = qa_oip.answer(self._logits, arrays)
        return InferenceResponse(
            model_name=self.name,
            outputs=[NumpyCodec.encode_output(name, out[name]) for name, _ in qa_oip.OUTPUTS],
        )
