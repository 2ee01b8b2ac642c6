// Runs an ONNX model in ONNX Runtime (CPU, onnxruntime-node) on one input read from a
// raw little-endian file, for tests/lua/onnx_spec.lua:
//   node run.js MODEL INPUT_FILE DTYPE SHAPE OUTPUT_FILE
// DTYPE is float32 or int64, SHAPE is comma-separated (5,1,28,28). The model's first
// output is written to OUTPUT_FILE as raw float32; stdout is one JSON line
// {"inputs": [names], "outputs": [names], "shape": [dims of the first output]}.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, inFile, dtype, shapeArg, outFile] = process.argv.slice(2);
  if (!outFile) throw new Error('usage: node run.js MODEL INPUT_FILE DTYPE SHAPE OUTPUT_FILE');
  const shape = shapeArg.split(',').map(Number);
  const buf = fs.readFileSync(inFile);
  const bytes = new Uint8Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  let data;
  if (dtype === 'float32') data = new Float32Array(bytes.buffer);
  else if (dtype === 'int64') data = new BigInt64Array(bytes.buffer);
  else throw new Error('unknown dtype ' + dtype);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1, interOpNumThreads: 1});
  const feeds = {[session.inputNames[0]]: new ort.Tensor(dtype, data, shape)};
  const results = await session.run(feeds);
  const out = results[session.outputNames[0]];
  const f = Float32Array.from(out.data);
  fs.writeFileSync(outFile, Buffer.from(f.buffer));
  process.stdout.write(JSON.stringify({inputs: session.inputNames, outputs: session.outputNames,
    shape: out.dims.map(Number)}) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
