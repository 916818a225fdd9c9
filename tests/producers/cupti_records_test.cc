// CuptiRecordParser, one record kind at a time: real CUDA 13 activity records
// (CUpti_ActivityKernel10, Memcpy6, Memset4, Memory4, API, ...) built by hand
// in a byte buffer; every field that reaches an Event is checked. No GPU, no
// libcupti: only the toolkit's headers. The walk itself (cut, unknown and
// empty buffers): cupti_records_walk_test.cc.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "producers/cupti_test_records.h"

namespace liveprof::cupti_test {

TEST_CASE("cupti records: a kernel becomes a kKernel with every field, its name copied") {
  Fixture f;
  const NameId op = f.stream.names().Intern("dense/MatMul");
  char name[64] = "volta_sgemm_128x64_nn";
  RecordBuffer b;
  b.Add(External(kCorr, op));
  b.Add(KernelRecord(name));
  const auto r = f.Parse(b);
  CHECK(r.records == 2);
  CHECK(r.events == 1);
  CHECK(r.complete);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 1);
  const Event& e = events[0];

  Event want;
  want.ts = Host(kT0);
  want.dur = 2 * (kT1 - kT0);
  want.name = f.stream.names().Intern("volta_sgemm_128x64_nn");
  want.track = e.track;
  want.corr = kCorr;
  want.kind = EventKind::kKernel;
  want.device = kDevice;
  want.payload.kernel.details = f.stream.names().Intern(kDetails);
  want.payload.kernel.context = kContext;
  want.payload.kernel.graph_id = 0;
  want.payload.kernel.op = op;
  CheckEvent(e, want);
  CHECK(f.Name(e.payload.kernel.details) == kDetails);

  const TrackInfo track = f.stream.track(e.track);
  CHECK(e.track != 0);
  CHECK(track.type == TrackType::kGpuStream);
  CHECK(track.os_id == kStreamId);
  CHECK(track.device == kDevice);
  CHECK(f.Name(track.name) == "GPU 1 stream 7");

  // CUPTI owns the char*: the interned copy survives the original changing.
  std::memset(name, 'X', 40);
  CHECK(f.Name(e.name) == "volta_sgemm_128x64_nn");
  // A pointer is trusted to keep its string (CUPTI shares one per kernel),
  // on the same track, shape and op lookup...
  std::strcpy(name, "elementwise_add_kernel");
  RecordBuffer b2;
  b2.Add(KernelRecord(name, kCorr + 1));
  f.Parse(b2);
  std::vector<Event> again = f.Drain();
  REQUIRE(again.size() == 1);
  CHECK(again[0].name == e.name);
  CHECK(again[0].track == e.track);
  CHECK(again[0].payload.kernel.details == e.payload.kernel.details);
  CHECK(again[0].payload.kernel.op == 0);  // no external correlation for corr 43.
  // ...until the owner says names may have been freed (a module unload).
  f.parser->ForgetKernelNames();
  f.Parse(b2);
  again = f.Drain();
  REQUIRE(again.size() == 1);
  CHECK(f.Name(again[0].name) == "elementwise_add_kernel");
  CHECK(f.parser->stats().by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == 3);
}

TEST_CASE("cupti records: a kernel's mangled name is shown demangled, as torch.profiler shows it") {
  Fixture f;
  // Names a PyTorch 2.11 job on an H200 launched (cuBLAS, ATen, cuDNN),
  // and what torch.profiler called the same kernels in the same run.
  const std::pair<const char*, const char*> kNames[] = {
      {"_Z11scal_kernelIffLi1ELb1ELi6ELi5ELi5ELi3EEv21cublasTransposeParamsIT0_EPKT_PS3_PKS1_",
       "void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(cublasTransposeParams<float>, float const*, "
       "float*, float const*)"},
      {"_ZN5cudnn19engines_precompiled16nhwcToNchwKernelIfffLb1ELb0EL21cudnnKernelDataType_t0EEEvNS0_"
       "18nhwc2nchw_params_tIT1_EEPKT_PT0_",
       "void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, true, false, "
       "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>, float const*, "
       "float*)"},
      // Not mangled: kept as they are.
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel_"
       "trt",
       "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel_"
       "trt"},
      {"triton_poi_fused_add_0", "triton_poi_fused_add_0"},
      // Looks mangled, is not: kept.
      {"_Zfoo", "_Zfoo"},
  };
  RecordBuffer b;
  uint32_t corr = kCorr;
  for (const auto& [mangled, shown] : kNames) b.Add(KernelRecord(mangled, corr++));
  f.Parse(b);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == std::size(kNames));
  for (size_t i = 0; i < events.size(); ++i) CHECK(f.Name(events[i].name) == kNames[i].second);
}

TEST_CASE("cupti records: every memcpy kind maps to its event kind, bytes and memory kinds") {
  struct Case {
    uint8_t copy_kind;
    EventKind kind;
    const char* name;
  };
  const Case cases[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, EventKind::kMemcpyHtoD, "MemcpyHtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, EventKind::kMemcpyDtoH, "MemcpyDtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, EventKind::kMemcpyHtoD, "MemcpyHtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, EventKind::kMemcpyDtoH, "MemcpyDtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, EventKind::kMemcpyDtoD, "MemcpyDtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, EventKind::kMemcpyDtoD, "MemcpyDtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, EventKind::kMemcpyDtoD, "MemcpyDtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, EventKind::kMemcpyDtoD, "MemcpyDtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, EventKind::kMemcpyHtoH, "MemcpyHtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, EventKind::kMemcpyPtoP, "MemcpyPtoP"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, EventKind::kMemcpyOther, "Memcpy"},
      {77, EventKind::kMemcpyOther, "Memcpy"},
  };
  Fixture f;
  RecordBuffer b;
  uint32_t corr = 100;
  for (const Case& c : cases) {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = c.copy_kind;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 1 << 20;
    m.start = kT0;
    m.end = kT2;
    m.deviceId = kDevice;
    m.contextId = kContext;
    m.streamId = kStreamId;
    m.correlationId = corr++;
    m.runtimeCorrelationId = 9999;
    m.copyCount = 1;
    b.Add(m);
  }
  CHECK(f.Parse(b).events == std::size(cases));
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == std::size(cases));
  const TrackId track = f.parser->StreamTrack(kDevice, kStreamId);
  for (size_t i = 0; i < std::size(cases); ++i) {
    CAPTURE(i);
    Event want;
    want.ts = Host(kT0);
    want.dur = 2 * (kT2 - kT0);
    want.name = f.stream.names().Intern(cases[i].name);
    want.track = track;
    want.corr = static_cast<uint32_t>(100 + i);
    want.kind = cases[i].kind;
    want.device = kDevice;
    want.payload.copy.bytes = 1 << 20;
    want.payload.copy.src_kind = static_cast<uint32_t>(MemoryKind::kPinned);
    want.payload.copy.dst_kind = static_cast<uint32_t>(MemoryKind::kDevice);
    CheckEvent(events[i], want);
    CHECK(f.Name(events[i].name) == cases[i].name);
  }
}

TEST_CASE("cupti records: a memset and a peer copy") {
  Fixture f;
  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0;
  s.bytes = 4096;
  s.start = kT1;
  s.end = kT2;
  s.deviceId = 0;
  s.contextId = kContext;
  s.streamId = 13;
  s.correlationId = 8;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  s.graphId = 6;  // from a graph: flagged.
  CUpti_ActivityMemcpyPtoP4 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  p.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  p.bytes = 512;
  p.start = kT0;
  p.end = kT1;
  p.deviceId = 2;
  p.streamId = 14;
  p.srcDeviceId = 2;
  p.dstDeviceId = 3;
  p.correlationId = 9;
  RecordBuffer b;
  b.Add(s);
  b.Add(p);
  CHECK(f.Parse(b).events == 2);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 2);

  Event want;
  want.ts = Host(kT1);
  want.dur = 2 * (kT2 - kT1);
  want.name = f.stream.names().Intern("Memset");
  want.track = f.parser->StreamTrack(0, 13);
  want.corr = 8;
  want.kind = EventKind::kMemset;
  want.flags = kFlagGraph;
  want.device = 0;
  want.payload.copy = {4096, 0, static_cast<uint32_t>(MemoryKind::kManaged)};
  CheckEvent(events[0], want);

  Event peer;
  peer.ts = Host(kT0);
  peer.dur = 2 * (kT1 - kT0);
  peer.name = f.stream.names().Intern("MemcpyPtoP");
  peer.track = f.parser->StreamTrack(2, 14);
  peer.corr = 9;
  peer.kind = EventKind::kMemcpyPtoP;
  peer.device = 2;
  peer.payload.copy = {512, static_cast<uint32_t>(MemoryKind::kDevice), static_cast<uint32_t>(MemoryKind::kDevice)};
  CheckEvent(events[1], peer);
  CHECK(f.stream.track(peer.track).device == 2);
}

TEST_CASE("cupti records: MEMORY2 allocations and releases become kAlloc and kFree") {
  Fixture f;
  auto memory = [](CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind, uint64_t ts, uint32_t async,
                   uint32_t stream) {
    CUpti_ActivityMemory4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = op;
    m.memoryKind = kind;
    m.correlationId = 70;
    m.address = 0x7f0000100000;
    m.bytes = 256 << 20;
    m.timestamp = ts;
    m.PC = 0x4000;
    m.processId = 99;
    m.deviceId = kDevice;
    m.contextId = kContext;
    m.streamId = stream;
    m.isAsync = async;
    return m;
  };
  RecordBuffer b;
  b.Add(memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kT0, 0,
               CUPTI_INVALID_STREAM_ID));
  b.Add(memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kT2, 1, 9));
  b.Add(memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, kT1, 0,
               CUPTI_INVALID_STREAM_ID));
  b.Add(memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kT1, 0,
               0));  // neither: read, counted, no event.
  const auto r = f.Parse(b);
  CHECK(r.records == 4);
  CHECK(r.events == 3);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 3);

  Event alloc;
  alloc.ts = Host(kT0);
  alloc.name = f.stream.names().Intern("cuda");
  // cudaMalloc names no stream: the device's allocations track (never
  // track 0, which no stream defines: an ingest server refuses it).
  alloc.track = f.parser->AllocationTrack(kDevice);
  alloc.corr = 70;
  alloc.kind = EventKind::kAlloc;
  alloc.sub = static_cast<uint8_t>(MemoryKind::kDevice);
  alloc.device = kDevice;
  alloc.payload.memory = {0x7f0000100000, 256 << 20};
  CheckEvent(events[0], alloc);

  Event free = alloc;
  free.ts = Host(kT2);
  free.name = f.stream.names().Intern("cuda_async");
  free.track = f.parser->StreamTrack(kDevice, 9);
  free.kind = EventKind::kFree;
  CheckEvent(events[1], free);

  Event pinned = alloc;
  pinned.ts = Host(kT1);
  pinned.sub = static_cast<uint8_t>(MemoryKind::kPinned);
  CheckEvent(events[2], pinned);
  CHECK(f.parser->stats().ignored == 1);
  const TrackInfo memory_track = f.stream.track(alloc.track);
  CHECK(alloc.track != 0);
  CHECK(memory_track.type == TrackType::kHostThread);  // instants, not a counter row
  CHECK(f.Name(memory_track.name) == "GPU " + std::to_string(kDevice) + " allocations");
}

TEST_CASE("cupti records: a local memory pool becomes the allocator's reserved-bytes counter") {
  Fixture f;
  auto pool = [](CUpti_ActivityMemoryPoolOperationType op, uint64_t ts) {
    CUpti_ActivityMemoryPool3 p{};
    p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    p.memoryPoolOperationType = op;
    p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    p.correlationId = 5;
    p.deviceId = kDevice;
    p.address = 0x7f0000000000;
    p.size = 1ull << 30;
    p.timestamp = ts;
    return p;
  };
  RecordBuffer b;
  b.Add(pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, kT0));
  b.Add(pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, kT1));
  CHECK(f.Parse(b).events == 2);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 2);
  Event want;
  want.ts = Host(kT0);
  want.name = f.stream.names().Intern("memory/cuda_async/reserved_bytes");
  want.track = f.parser->PoolTrack(kDevice);
  want.corr = 5;
  want.kind = EventKind::kCounter;
  want.device = kDevice;
  want.payload.counter.value = static_cast<double>(1ull << 30);
  CheckEvent(events[0], want);
  CHECK(events[1].ts == Host(kT1));
  CHECK(events[1].payload.counter.value == 0.0);
  CHECK(f.stream.track(want.track).type == TrackType::kCounter);
  CHECK(f.Name(f.stream.track(want.track).name) == "GPU " + std::to_string(kDevice) + " memory pool");
}

TEST_CASE("cupti records: runtime and driver API records become kRuntimeApi on their thread") {
  Fixture f;
  // The host API already has a track for this OS thread: API spans join it.
  const TrackId host_track =
      f.stream.AddTrack({f.stream.names().Intern("trainer 4321"), TrackType::kHostThread, kThread, 0});
  RecordBuffer b;
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 11));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 12));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, 4000, 13));  // no name known anywhere.
  CUpti_ActivityAPI other = ApiRecord(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, 0, 14);
  other.threadId = 777;  // a thread the host API never saw.
  b.Add(other);
  CHECK(f.Parse(b).events == 4);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 4);
  const char* names[] = {"cudaLaunchKernel", "cuLaunchKernel", "cuda_runtime_api#4000", "CUDA internal Launch"};
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    Event want;
    want.ts = Host(kT0);
    want.dur = 2 * (kT1 - kT0);
    want.name = f.stream.names().Intern(names[i]);
    want.track = host_track;
    want.corr = static_cast<uint32_t>(11 + i);
    want.kind = EventKind::kRuntimeApi;
    want.sub = static_cast<uint8_t>(i == 1 ? ApiLayer::kDriver : ApiLayer::kRuntime);
    CheckEvent(events[i], want);
  }
  CHECK(f.Name(events[3].name) == names[3]);
  CHECK(events[3].corr == 14);
  const TrackInfo t = f.stream.track(events[3].track);
  CHECK(events[3].track != host_track);
  CHECK(t.type == TrackType::kHostThread);
  CHECK(t.os_id == 777);
  CHECK(f.Name(t.name) == "CUDA API thread 777");
}

TEST_CASE("cupti records: API names come from the resolver first, without CUPTI's version") {
  CuptiRecordParser::Options options;
  int asked = 0;
  options.api_name = [&](bool driver, uint32_t cbid) -> const char* {
    ++asked;
    if (!driver && cbid == 4000) return "cudaFutureCall_v13010";
    if (!driver && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) {
      return "cudaMemcpyAsync_v3020";
    }
    return nullptr;
  };
  options.os_thread_ids = false;
  Fixture f(std::move(options));
  RecordBuffer b;
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, 4000, 1));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, 4000, 2));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 3));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 4));
  f.Parse(b);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 4);
  CHECK(f.Name(events[0].name) == "cudaFutureCall");
  CHECK(events[1].name == events[0].name);
  CHECK(f.Name(events[2].name) == "cudaMemcpyAsync");
  CHECK(f.Name(events[3].name) == "cuGraphLaunch");  // resolver said null: built-in table.
  CHECK(asked == 3);                                 // once per callback id.
  // pthread_self()-style ids get a track of their own, named in hex.
  CHECK(f.Name(f.stream.track(events[0].track).name) == "CUDA API thread 0x10e1");
}

TEST_CASE("cupti records: graph-launched kernels share the launch's corr, op and graph id") {
  Fixture f;
  const NameId op = f.stream.names().Intern("model/block_3/fused");
  constexpr uint32_t kGraphCorr = 77;
  char k1[] = "graph_gemm";
  char k2[] = "graph_softmax";
  RecordBuffer b;
  b.Add(External(kGraphCorr, op));
  b.Add(ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, kGraphCorr));
  for (const char* name : {k1, k2, k1}) {
    CUpti_ActivityKernel10 k = KernelRecord(name, kGraphCorr);
    k.graphId = 5;
    k.graphNodeId = 500;
    b.Add(k);
  }
  b.Add(KernelRecord(k2, 78));  // an ordinary launch, after the graph.
  CHECK(f.Parse(b).events == 5);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 5);
  CHECK(events[0].kind == EventKind::kRuntimeApi);
  CHECK(f.Name(events[0].name) == "cudaGraphLaunch");
  CHECK(events[0].corr == kGraphCorr);
  for (size_t i = 1; i <= 3; ++i) {
    CAPTURE(i);
    CHECK(events[i].kind == EventKind::kKernel);
    CHECK(events[i].corr == kGraphCorr);
    CHECK(events[i].flags == kFlagGraph);
    CHECK(events[i].payload.kernel.graph_id == 5);
    CHECK(events[i].payload.kernel.op == op);
  }
  CHECK(f.Name(events[2].name) == "graph_softmax");
  CHECK(events[1].name == events[3].name);
  CHECK(events[4].flags == 0);
  CHECK(events[4].payload.kernel.graph_id == 0);
  CHECK(events[4].payload.kernel.op == 0);
}

TEST_CASE("cupti records: an op mapping after its kernel, or of another kind, is not used") {
  Fixture f;
  const NameId op = f.stream.names().Intern("conv1/Conv2D");
  RecordBuffer b;
  b.Add(External(50, 12345, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0));  // Kineto's, not ours.
  b.Add(KernelRecord("k", 50));
  b.Add(KernelRecord("k", 51));
  b.Add(External(51, op));  // too late for the kernel above.
  b.Add(KernelRecord("k", 51));
  f.Parse(b);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 3);
  CHECK(events[0].payload.kernel.op == 0);
  CHECK(events[1].payload.kernel.op == 0);
  CHECK(events[2].payload.kernel.op == op);
  // A corr that left the table (kCorrTableSize launches later) finds nothing.
  RecordBuffer b2;
  b2.Add(KernelRecord("k", 51 + CuptiRecordParser::kCorrTableSize));
  f.Parse(b2);
  CHECK(f.Drain().at(0).payload.kernel.op == 0);
}

TEST_CASE("cupti records: NVTX markers become host spans and instants on their thread") {
  Fixture f;
  auto marker = [](uint32_t flags, uint32_t id, uint64_t ts, const char* name) {
    CUpti_ActivityMarker2 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = static_cast<CUpti_ActivityFlag>(flags);
    m.timestamp = ts;
    m.id = id;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = 99;
    m.objectId.pt.threadId = kThread;
    m.name = name;
    m.domain = nullptr;
    return m;
  };
  char range_name[] = "forward";
  RecordBuffer b;
  b.Add(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, kT0, range_name));
  b.Add(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 2, kT1, "checkpoint"));
  b.Add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, kT2, nullptr));
  b.Add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 3, kT2, nullptr));  // never started.
  const auto r = f.Parse(b);
  CHECK(r.records == 4);
  CHECK(r.events == 2);
  std::strcpy(range_name, "clobber");
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 2);
  const TrackId thread = f.parser->ThreadTrack(kThread);

  Event instant;
  instant.ts = Host(kT1);
  instant.name = f.stream.names().Intern("checkpoint");
  instant.track = thread;
  instant.kind = EventKind::kInstant;
  CheckEvent(events[0], instant);

  Event span;
  span.ts = Host(kT0);
  span.dur = Host(kT2) - Host(kT0);
  span.name = f.stream.names().Intern("forward");
  span.track = thread;
  span.kind = EventKind::kHostSpan;
  CheckEvent(events[1], span);
  CHECK(f.DiagCount(Diag::cupti_unmatched_marker) == 1);
}

TEST_CASE("cupti records: overhead on a thread is a host span, synchronization is counted") {
  Fixture f;
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.threadId = kThread;
  o.start = kT0;
  o.end = kT1;
  o.correlationId = 0;
  CUpti_ActivityOverhead3 device_overhead = o;
  device_overhead.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.start = kT1;
  s.end = kT2;
  s.correlationId = 90;
  RecordBuffer b;
  b.Add(o);
  b.Add(device_overhead);
  b.Add(s);
  const auto r = f.Parse(b);
  CHECK(r.records == 3);
  CHECK(r.events == 1);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 1);
  Event want;
  want.ts = Host(kT0);
  want.dur = 2 * (kT1 - kT0);
  want.name = f.stream.names().Intern("CUPTI overhead: buffer flush");
  want.track = f.parser->ThreadTrack(kThread);
  want.kind = EventKind::kHostSpan;
  CheckEvent(events[0], want);
  CHECK(f.parser->stats().by_kind[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION] == 1);
  CHECK(f.parser->stats().by_kind[CUPTI_ACTIVITY_KIND_OVERHEAD] == 2);
  CHECK(f.parser->stats().ignored == 2);
  // Both are CUPTI's own work, whatever they charge: summed in CUPTI ns.
  CHECK(f.parser->stats().cupti_overheads == 2);
  CHECK(f.parser->stats().cupti_overhead_ns == 2 * (kT1 - kT0));
}

TEST_CASE("cupti records: only CUPTI's own overhead kinds are its cost, not CUDA's lazy loading") {
  Fixture f;
  RecordBuffer b;
  uint64_t own_ns = 0;
  const struct {
    uint32_t kind;
    bool own;
  } cases[] = {
      {CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, true},
      {CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION, true},
      {CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE, true},
      {CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST, true},
      {CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT, true},
      {CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER, false},
      {CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING, false},
      {CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING, false},
      {CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL, false},
      {CUPTI_ACTIVITY_OVERHEAD_UNKNOWN, false},
  };
  uint64_t t = kT0;
  for (size_t i = 0; i < std::size(cases); ++i) {
    CUpti_ActivityOverhead3 o{};
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = static_cast<CUpti_ActivityOverheadKind>(cases[i].kind);
    o.objectKind = CUPTI_ACTIVITY_OBJECT_PROCESS;
    o.start = t;
    o.end = t + 1'000 * (i + 1);  // each its own length.
    if (cases[i].own) own_ns += o.end - o.start;
    t = o.end + 10;
    b.Add(o);
  }
  f.Parse(b);
  CHECK(f.parser->stats().by_kind[CUPTI_ACTIVITY_KIND_OVERHEAD] == std::size(cases));
  CHECK(f.parser->stats().cupti_overheads == 5);
  CHECK(own_ns == 15'000);
  CHECK(f.parser->stats().cupti_overhead_ns == own_ns);
}

}  // namespace liveprof::cupti_test
