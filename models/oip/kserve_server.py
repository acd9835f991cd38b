"""bertqa's test models on KServe's Python model server (a custom predictor per model,
Open Inference Protocol over HTTP and gRPC). scripts/testbed/oip_server.sh starts it:

    python kserve_server.py --http_port P --grpc_port Q   (KServe's own flags)
"""
import uuid

import kserve
from kserve import InferRequest, InferResponse, InferOutput, Model, ModelServer

import qa_oip


class QAPredictor(Model):
    def __init__(self, name):
        super().__init__(name)
        self._logits = qa_oip.logits_for(name)
        self.ready = True

    def get_input_types(self):
        return qa_oip.tensors(qa_oip.INPUTS)

    def get_output_types(self):
        return qa_oip.tensors(qa_oip.OUTPUTS)

    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        arrays = {i.name: i.as_numpy() for i in payload.inputs}
        out = qa_oip.answer(self._logits, arrays)
        outputs = []
        for name, datatype in qa_oip.OUTPUTS:
            o = InferOutput(name=name, shape=list(out[name].shape), datatype=datatype)
            o.set_data_from_numpy(out[name], binary_data=False)
            outputs.append(o)
        return InferResponse(model_name=self.name, infer_outputs=outputs, response_id=payload.id or str(uuid.uuid4()))


if __name__ == "__main__":
    ModelServer().start([QAPredictor(name) for name in qa_oip.MODELS])
