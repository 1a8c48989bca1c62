fn main() {
    println!("not yet");
}
