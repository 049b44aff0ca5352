//! The gRPC binding's definition: `proto/a2a.proto` must describe the same wire as the
//! specification's `a2a.proto`, and the Rust code generated from it (checked in under
//! `src/grpc/generated/`) must be what the generator makes of it today. The specification's
//! file is kept verbatim in `tests/fixtures/a2a-spec.proto`.
//!
//! The generated code is checked in rather than built by a build script, so neither this
//! crate's users nor CI compile a protobuf compiler for every build; this test compiles the
//! proto with `protox` (pure Rust, no `protoc`) and fails when the two drift apart.
//! `LOOOPY_REGENERATE_PROTO=1` rewrites the checked-in file instead.

use std::path::{Path, PathBuf};

use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generated_path() -> PathBuf {
    manifest_dir().join("src/grpc/generated/lf.a2a.v1.rs")
}

fn compile(file: &str, include: &Path) -> FileDescriptorSet {
    protox::compile([file], [include]).unwrap_or_else(|e| panic!("{file} does not compile: {e}"))
}

/// The server's codec: a request that is not valid protobuf is `INVALID_ARGUMENT`, not
/// tonic's `INTERNAL` (see `looopy_a2a::grpc::status::RequestCodec`).
const SERVER_CODEC: &str = "crate::grpc::status::RequestCodec";

/// What the generator makes of `proto/a2a.proto` now, for one side: the messages and the
/// server (with [`SERVER_CODEC`]), or the messages and the client (with tonic's codec).
fn generate_side(server: bool) -> String {
    let fds = compile("a2a.proto", &manifest_dir().join("proto"));
    let out = tempfile::tempdir().unwrap();
    let mut builder = tonic_prost_build::configure()
        .build_server(server)
        .build_client(!server)
        // No `connect(url)` on the client: it would need tonic's transport; callers hand
        // the client any channel.
        .build_transport(false)
        .out_dir(out.path());
    if server {
        builder = builder.codec_path(SERVER_CODEC);
    }
    builder.compile_fds(fds).unwrap();
    std::fs::read_to_string(out.path().join("lf.a2a.v1.rs")).unwrap()
}

/// The checked-in file: the server side's output with the client side's client module put
/// where the generator puts it (after the messages, before the server), so each side has
/// its own codec.
fn generate() -> String {
    const CLIENT: &str = "/// Generated client implementations.\n";
    const SERVER: &str = "/// Generated server implementations.\n";
    let server = generate_side(true);
    let client = generate_side(false);
    let at = server.find(SERVER).expect("the server module");
    let from = client.find(CLIENT).expect("the client module");
    assert!(!server.contains(CLIENT) && !client.contains(SERVER));
    format!("{}{}{}", &server[..at], &client[from..], &server[at..])
}

#[test]
fn checked_in_code_is_what_the_proto_generates() {
    let fresh = generate();
    let path = generated_path();
    if std::env::var_os("LOOOPY_REGENERATE_PROTO").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is not what proto/a2a.proto generates; regenerate it with \
         LOOOPY_REGENERATE_PROTO=1 cargo test -p looopy-a2a --features grpc --test grpc_proto",
        path.display()
    );
}

/// The wire-relevant part of a file's descriptor: names, numbers, types, labels, oneofs,
/// enum values, methods and their streaming; no options, comments or imports.
fn wire_shape(file: &FileDescriptorProto) -> FileDescriptorProto {
    fn message(m: &DescriptorProto) -> DescriptorProto {
        let mut m = m.clone();
        m.options = None;
        for f in &mut m.field {
            f.options = None;
            f.json_name = None;
        }
        for o in &mut m.oneof_decl {
            o.options = None;
        }
        m.nested_type = m.nested_type.iter().map(message).collect();
        m
    }
    let mut shape = FileDescriptorProto {
        package: file.package.clone(),
        syntax: file.syntax.clone(),
        message_type: file.message_type.iter().map(message).collect(),
        enum_type: file.enum_type.clone(),
        service: file.service.clone(),
        ..FileDescriptorProto::default()
    };
    for e in &mut shape.enum_type {
        e.options = None;
        for v in &mut e.value {
            v.options = None;
        }
    }
    for s in &mut shape.service {
        s.options = None;
        for m in &mut s.method {
            m.options = None;
        }
    }
    shape
}

/// The specification's file with its `google.api` annotations removed (they need protos
/// this test does not have, and do not change the wire), compiled the same way.
fn reference_shape(reference: &Path) -> Option<FileDescriptorProto> {
    let text = std::fs::read_to_string(reference).ok()?;
    let mut kept = String::new();
    let mut depth_in_rpc_options = 0usize;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("import \"google/api/") {
            continue;
        }
        if depth_in_rpc_options > 0 {
            depth_in_rpc_options += trimmed.matches('{').count();
            depth_in_rpc_options -= trimmed.matches('}').count();
            if depth_in_rpc_options == 0 {
                kept.push_str("  }\n");
            }
            continue;
        }
        if trimmed.starts_with("rpc ") && trimmed.ends_with('{') {
            depth_in_rpc_options = 1;
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        let mut line = line.to_owned();
        while let Some(start) = line.find(" [(google.api.field_behavior)") {
            let end = line[start..].find(']').map(|e| start + e + 1)?;
            line.replace_range(start..end, "");
        }
        kept.push_str(&line);
        kept.push('\n');
    }
    let dir = tempfile::tempdir().ok()?;
    std::fs::write(dir.path().join("a2a.proto"), kept).ok()?;
    let fds = compile("a2a.proto", dir.path());
    fds.file
        .iter()
        .find(|f| f.name() == "a2a.proto")
        .map(wire_shape)
}

/// The specification's `a2a.proto`, verbatim (A2A project, Apache-2.0), kept beside the
/// tests so the comparison runs anywhere.
fn spec_fixture() -> PathBuf {
    manifest_dir().join("tests/fixtures/a2a-spec.proto")
}

#[test]
fn the_fixture_is_the_shared_reference_when_it_is_there() {
    let shared = manifest_dir().join("../../../shared/reference/a2a/a2a.proto");
    let Ok(reference) = std::fs::read_to_string(&shared) else {
        eprintln!(
            "skipping: no shared reference at {} to compare the fixture with",
            shared.display()
        );
        return;
    };
    let fixture = std::fs::read_to_string(spec_fixture()).unwrap();
    assert!(
        fixture == reference,
        "tests/fixtures/a2a-spec.proto differs from {}: copy the new specification file \
         and check proto/a2a.proto against it",
        shared.display()
    );
}

#[test]
fn the_proto_matches_the_specification_on_the_wire() {
    let spec = reference_shape(&spec_fixture()).expect("the specification's proto compiles");
    let fds = compile("a2a.proto", &manifest_dir().join("proto"));
    let ours = fds
        .file
        .iter()
        .find(|f| f.name() == "a2a.proto")
        .map(wire_shape)
        .unwrap();
    assert_eq!(ours.package(), "lf.a2a.v1");
    assert_eq!(ours.package, spec.package);
    assert_eq!(ours.enum_type, spec.enum_type);
    assert_eq!(ours.service, spec.service);
    let names = |f: &FileDescriptorProto| {
        f.message_type
            .iter()
            .map(|m| m.name().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&ours), names(&spec));
    for (a, b) in ours.message_type.iter().zip(&spec.message_type) {
        assert_eq!(a, b, "message {} differs from the specification", a.name());
    }
    // Every method the service has, with its streaming, as the spec declares it.
    let service = &ours.service[0];
    assert_eq!(service.name(), "A2AService");
    let streaming: Vec<&str> = service
        .method
        .iter()
        .filter(|m| m.server_streaming())
        .map(|m| m.name())
        .collect();
    assert_eq!(streaming, ["SendStreamingMessage", "SubscribeToTask"]);
    assert_eq!(service.method.len(), 11);
}
